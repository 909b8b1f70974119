package crtest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Author is a client of the user "mallory", who may do anything with the resources of group
// (one of them, plural) and with ConfigMaps of namespace ns, and nothing else: a CR author as
// the security model has them. admin creates the Role and binding; cfg is admin's config.
func Author(t testing.TB, admin client.Client, cfg *rest.Config, ns, group, plural string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cr-author"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cr-author"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cr-author"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "mallory"}
	c, err := client.New(as, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "anything"}, &s); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("the CR author may read Secrets: %v", err)
	}
	return c
}
