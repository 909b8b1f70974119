package machine

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// An operand's update asks for a drift check when it changes the spec (the generation) or a
// label or annotation its release's manifest sets; metadata another controller keeps on the
// object (a Deployment's revision annotation) and the cached verdict do not. A CR
// whose manifest this process does not know, or an object it does not hold, is checked.
func TestOperandUpdatesAskForDriftChecks(t *testing.T) {
	t.Parallel()
	crGVK := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	owner := records.OwnerAnnotation(crGVK.GroupKind(), key)
	deployment := func(generation int64, labels, annotations map[string]string) *appsv1.Deployment {
		ann := map[string]string{records.AnnotationOwner: owner}
		maps.Copy(ann, annotations)
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Generation: generation,
			Labels: labels, Annotations: ann}}
	}
	manifest := deployment(1, map[string]string{"app": "w", records.LabelManaged: "true"}, map[string]string{"example.com/team": "a"})
	manifest.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	live := deployment(1, map[string]string{"app": "w", records.LabelManaged: "true"}, map[string]string{kstatusKey: "InProgress", "example.com/team": "a"})
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		known    bool
		cur      *appsv1.Deployment
		wantDirt bool
	}{
		{"status only: the verdict changed", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "Current", "example.com/team": "a"}), false},
		{"another controller's annotation", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "InProgress", "example.com/team": "a", "deployment.kubernetes.io/revision": "1"}), false},
		{"another controller's label", apps("Deployment"), true,
			deployment(1, map[string]string{"app": "w", records.LabelManaged: "true", "pod-template-hash": "x"}, live.Annotations), false},
		{"a label the manifest sets", apps("Deployment"), true,
			deployment(1, map[string]string{"app": "tampered", records.LabelManaged: "true"}, live.Annotations), true},
		{"a label the manifest sets, removed", apps("Deployment"), true,
			deployment(1, map[string]string{records.LabelManaged: "true"}, live.Annotations), true},
		{"an annotation the manifest sets", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "InProgress", "example.com/team": "b"}), true},
		{"the spec", apps("Deployment"), true, deployment(2, live.Labels, live.Annotations), true},
		{"a kind the manifest does not hold under that name", apps("ReplicaSet"), true,
			deployment(1, live.Labels, map[string]string{"deployment.kubernetes.io/revision": "1"}), true},
		{"a manifest this process does not know", apps("Deployment"), false,
			deployment(1, live.Labels, map[string]string{"deployment.kubernetes.io/revision": "1"}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(&watches.Watch{Group: crGVK.Group, Version: crGVK.Version, Kind: crGVK.Kind})
			if tc.known {
				m.rememberObjects(key, 1, []*unstructured.Unstructured{toUnstructured(t, manifest)})
			}
			m.OperandUpdated(key, tc.gk, live, tc.cur)
			if dirty := m.dirty[key] != 0; dirty != tc.wantDirt {
				t.Fatalf("drift check asked: %v, want %v", dirty, tc.wantDirt)
			}
		})
	}
}

func apps(kind string) schema.GroupKind { return schema.GroupKind{Group: "apps", Kind: kind} }

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}
