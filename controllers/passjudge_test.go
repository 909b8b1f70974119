package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// The objects an install just made that the operand cache does not show yet (their create
// events have not come) are judged as Helm sent them: a release whose objects kstatus finds
// current when made is Ready in the one status write of its install, and one whose Deployment
// has no replica yet waits on kstatus's word for it, not on "not found".
func TestPassJudgesWhatItJustMade(t *testing.T) {
	t.Parallel()
	deployment := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
	configMap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "w", "namespace": "ns"},
	}}
	for _, tc := range []struct {
		sent  *unstructured.Unstructured
		ready string
	}{
		{configMap, "Ready=True/ObjectsReady"},
		{deployment, "Ready=False/Progressing"},
	} {
		t.Run(tc.sent.GetKind(), func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			h.deleteObject() // what the pass reads does not show the object yet
			h.helm.Made = []*unstructured.Unstructured{tc.sent}
			if _, err := h.pass(); err != nil {
				t.Fatal(err)
			}
			if got := h.conds(rstatus.TypeReady); got[0] != tc.ready {
				t.Fatalf("after the install: %s, want %s", got[0], tc.ready)
			}
			if c := meta.FindStatusCondition(rstatus.ConditionsOf(h.cr()), rstatus.TypeReady); strings.Contains(c.Message, "not found") {
				t.Fatalf("Ready waits on the cache: %q", c.Message)
			}
			if got := h.helm.Calls(); len(got) != 1 || got[0] != "Install" {
				t.Fatalf("Helm calls %q, want one install", got)
			}
		})
	}
}
