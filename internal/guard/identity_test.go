package guard

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/rudder-operator/rudder/internal/release"
)

// TestIdentities: a release hands out only the ServiceAccounts it makes, "default" for Pods,
// and what the watch names; every other token Secret, Pod ServiceAccount and binding subject
// is refused, naming the object and the identity.
func TestIdentities(t *testing.T) {
	const ownSA = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: own}\n"
	tests := []struct {
		name     string
		manifest string
		hook     string
		allow    Confinement
		refused  string // "" when allowed; else a piece of the violation
	}{
		{name: "token for another's ServiceAccount",
			manifest: "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {name: t, annotations: {kubernetes.io/service-account.name: deployer}}\n",
			refused:  `Secret "t": a token Secret for the ServiceAccount "deployer"`},
		{name: "token for its own ServiceAccount",
			manifest: ownSA + "---\napiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {name: t, annotations: {kubernetes.io/service-account.name: own}}\n"},
		{name: "token for a ServiceAccount the watch allows",
			manifest: "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {name: t, annotations: {kubernetes.io/service-account.name: platform}}\n",
			allow:    Confinement{AllowServiceAccounts: []string{"platform"}}},
		{name: "an Opaque Secret", manifest: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"},
		{name: "Pod as another's ServiceAccount",
			manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: deployer, containers: [{name: c, image: i}]}\n",
			refused:  `runs Pods as the ServiceAccount "deployer"`},
		{name: "Pod as default", manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: default}\n"},
		{name: "Deployment as another's ServiceAccount (deprecated field)",
			manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {serviceAccount: deployer}}}\n",
			refused:  `(serviceAccount)`},
		{name: "CronJob as its own ServiceAccount, made by a hook",
			manifest: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: {spec: {serviceAccountName: own}}}}}\n",
			hook:     ownSA},
		{name: "CronJob as another's",
			manifest: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: {spec: {serviceAccountName: other}}}}}\n",
			refused:  `CronJob "c"`},
		{name: "a ServiceAccount made in another namespace is not this one's",
			manifest: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: own, namespace: elsewhere}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: own}\n",
			refused:  `"own"`},
		{name: "binding of a user",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\nsubjects: [{kind: User, name: mallory}]\n",
			refused:  "binds the User mallory"},
		{name: "binding of its own ServiceAccount",
			manifest: ownSA + "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}\nsubjects: [{kind: ServiceAccount, name: own, namespace: tenant}]\n"},
		{name: "binding of another's ServiceAccount",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\nsubjects: [{kind: ServiceAccount, name: deployer}]\n",
			refused:  "binds the ServiceAccount deployer of namespace tenant"},
		{name: "binding of a group the watch allows",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\nsubjects: [{kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}]\n",
			allow:    Confinement{AllowSubjects: []rbacv1.Subject{{Kind: "Group", Name: "devs"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.allow
			c.Namespace = "tenant"
			rel := &release.Release{Manifest: tt.manifest}
			if tt.hook != "" {
				rel.Hooks = []*release.Hook{{Manifest: tt.hook, Events: []string{"pre-install"}}}
			}
			vs, err := checkIdentities(c, releaseStreams(rel))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.refused == "" && len(vs) > 0:
				t.Fatalf("refused: %v", vs)
			case tt.refused != "" && (len(vs) != 1 || !strings.Contains(vs[0].String(), tt.refused)):
				t.Fatalf("got %v, want one violation with %q", vs, tt.refused)
			}
		})
	}
}

// TestNeededIdentities: what scaffold writes for a chart's defaults.
func TestNeededIdentities(t *testing.T) {
	rel := &release.Release{Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: platform}\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n" +
		"subjects: [{kind: Group, name: devs}, {kind: ServiceAccount, name: platform}]\n"}
	got, err := NeededBy("tenant", rel)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ServiceAccounts) != 1 || got.ServiceAccounts[0] != "platform" || len(got.Subjects) != 1 || got.Subjects[0].Name != "devs" {
		t.Fatalf("got %+v", got)
	}
}

// TestReleaseEntries: a "<release>" entry of allowServiceAccounts or allowRoles allows the name
// with the release's in its place, and a name that holds the release's that the chart's defaults
// hand out or bind for this release (ChartOwn); never without such an entry, never a name that
// does not hold the release's, and what ChartOwnOf finds of a render is what it names after the
// release and does not make.
func TestReleaseEntries(t *testing.T) {
	own := map[string]bool{OwnServiceAccount("webstack-sa"): true, OwnRole("ClusterRole", "webstack-reader"): true}
	asked := 0
	chartOwn := func(e string) bool { asked++; return own[e] }
	c := Confinement{Namespace: "tenant", Release: "webstack", ChartOwn: chartOwn,
		AllowServiceAccounts: []string{"<release>-webstack-sa"}, AllowRoles: []string{"ClusterRole/<release>-webstack-reader"}}
	pod := func(sa string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: " + sa + ", containers: [{name: c, image: i}]}\n"
	}
	binding := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s}\nsubjects: []\n"
	tests := []struct {
		name     string
		c        Confinement
		manifest string
		refused  string
	}{
		{"the entry's name for this release", c, pod("webstack-webstack-sa"), ""},
		{"the chart's own, named by its defaults", c, pod("webstack-sa"), ""},
		{"not the chart's", c, pod("webstack-other"), `"webstack-other"`},
		{"not after the release", c, pod("payments"), `"payments"`},
		{"the chart's own without an entry", Confinement{Namespace: "tenant", Release: "webstack", ChartOwn: chartOwn}, pod("webstack-sa"), `"webstack-sa"`},
		{"a role the chart binds", c, strings.Replace(binding, "%s", "webstack-reader", 1), ""},
		{"a role it does not", c, strings.Replace(binding, "%s", "webstack-admin", 1), `binds the ClusterRole "webstack-admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.CheckObjectRules(&release.Release{Name: "webstack", Namespace: "tenant", Manifest: tt.manifest}, nil)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("got %v, want a refusal naming %s", err, tt.refused)
			}
		})
	}
	if asked == 0 {
		t.Fatal("ChartOwn was never asked")
	}

	found, err := ChartOwnOf("tenant", &release.Release{Name: "webstack", Namespace: "tenant", Manifest: pod("webstack-sa") + "---\n" +
		strings.Replace(binding, "%s", "webstack-reader", 1) + "---\n" + strings.Replace(binding, "%s", "view", 1) + "---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: {containers: [{name: c, image: i, envFrom: [{secretRef: {name: webstack-redis}}, {secretRef: {name: shared}}]}]}\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{OwnServiceAccount("webstack-sa"): true, OwnRole("ClusterRole", "webstack-reader"): true,
		OwnRead(secretKind, "webstack-redis"): true}
	if len(found) != len(want) {
		t.Fatalf("ChartOwnOf = %v, want %v", found, want)
	}
	for e := range want {
		if !found[e] {
			t.Fatalf("ChartOwnOf = %v, want %v", found, want)
		}
	}
}

// checkIdentities checks the objects of the streams of one release (its manifest and every
// hook) against c's identity rules alone.
func checkIdentities(c Confinement, streams []identityStream) ([]Violation, error) {
	objs, err := parseStreams(streams)
	if err != nil {
		return nil, err
	}
	return newReleaseSet(c, objs).identityViolations(nil), nil
}
