package records

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Within one action each record is read from the API server once: a second read, a read of a
// record that is not there, and a read of what the action wrote send no request; a write that
// fails leaves the record to be read again.
func TestMemoReadsEachRecordOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "a", Labels: map[string]string{"k": "v"}}})
	gets := 0
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	failUpdate := false
	cs.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failUpdate {
			return true, nil, errors.New("etcd is down")
		}
		return false, nil, nil
	})
	m := newMemoSecrets(cs.CoreV1().Secrets("n"), memoOf(ctx), "n")
	read := func(name string) *corev1.Secret {
		t.Helper()
		s, err := m.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return s
	}
	first := read("a")
	first.Labels["k"] = "changed by the caller"
	if again := read("a"); again.Labels["k"] != "v" || gets != 1 {
		t.Fatalf("second read: labels %v after %d requests, want the record as stored after 1", again.Labels, gets)
	}
	if read("b"); read("b") != nil || gets != 2 {
		t.Fatalf("a record that is not there: %d requests, want 2", gets)
	}
	if _, err := m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if read("b") == nil || gets != 2 {
		t.Fatalf("the record the action created: %d requests, want none more", gets)
	}
	failUpdate = true
	if _, err := m.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{}); err == nil {
		t.Fatal("the update did not fail")
	}
	if read("a"); gets != 3 {
		t.Fatalf("after a failed update: %d requests, want the record read again (3)", gets)
	}
	if err := m.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if read("a") != nil || gets != 3 {
		t.Fatalf("the record the action deleted: %d requests, want none more", gets)
	}
}
