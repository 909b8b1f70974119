package guard

import (
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/release"
)

// TestObjectRules: grants, pod privileges, externalIPs and references, each path refused
// naming the object, the field and the watch field that would allow it, and each allowed
// where the release makes what it names or the watch allows it.
func TestObjectRules(t *testing.T) {
	const (
		ownRole  = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: own}\nrules: [{apiGroups: [''], resources: [configmaps], verbs: [get]}]\n---\n"
		ownDB    = "apiVersion: v1\nkind: Secret\nmetadata: {name: own-db}\n---\n"
		ownApp   = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec: {template: {spec: {containers: [{name: c, image: i}]}}}\n---\n"
		readCMs  = "[{apiGroups: [''], resources: [configmaps], verbs: [get, list]}]"
		pod      = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: "
		deployOf = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {metadata: {labels: {a: b}}, spec: "
	)
	cmRule := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}
	tests := []struct {
		name     string
		manifest string
		allow    Confinement
		claimed  bool   // the API server says the named object is meant for the CR
		refused  string // "" when allowed; else a piece of the one violation
	}{
		// Grants.
		{name: "binding of a built-in ClusterRole",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\nsubjects: []\n",
			refused:  `RoleBinding "b": binds the ClusterRole "admin", which this release does not make and the watch's allowRoles does not name`},
		{name: "binding of a ClusterRole the watch names",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n",
			allow:    Confinement{AllowRoles: []string{"ClusterRole/view"}}},
		{name: "binding of a Role the watch names as a ClusterRole",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: view}\n",
			allow:    Confinement{AllowRoles: []string{"ClusterRole/view"}}, refused: `binds the Role "view"`},
		{name: "binding of its own Role within allowRules",
			manifest: ownRole + "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: own}\n",
			allow:    Confinement{AllowRules: cmRule}},
		{name: "its own Role in another namespace is not this binding's",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: own, namespace: other}\nrules: []\n---\n" +
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: own}\n",
			refused: `binds the Role "own"`},
		{name: "a rule added past allowRules",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules: " + readCMs + "\n---\n" +
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r2}\nrules: [{apiGroups: [''], resources: [secrets], verbs: [get]}]\n",
			allow: Confinement{AllowRules: cmRule}, refused: `Role "r2": grants get secrets (apiGroups ""), which the watch's allowRules do not cover`},
		{name: "a ClusterRole of a wildcard", manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: c}\nrules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n",
			allow: Confinement{AllowRules: cmRule}, refused: `grants * * (apiGroups *)`},
		{name: "a named resource within a rule without names",
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules: [{apiGroups: [''], resources: [configmaps], resourceNames: [x], verbs: [get]}]\n",
			allow:    Confinement{AllowRules: cmRule}},
		// Pod privileges.
		{name: "a privileged Pod under the default baseline",
			manifest: pod + "{hostPID: true, hostNetwork: true, containers: [{name: c, image: i, securityContext: {privileged: true}}], volumes: [{name: root, hostPath: {path: /}}]}\n",
			refused:  `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume "root"), privileged (container "c" must not set securityContext.privileged=true), and the watch's podSecurity is baseline`},
		{name: "a privileged Deployment the watch allows",
			manifest: deployOf + "{hostNetwork: true, containers: [{name: c, image: i}]}}}\n",
			allow:    Confinement{PodSecurity: PodSecurityPrivileged}},
		{name: "a root Pod under restricted", manifest: pod + "{containers: [{name: c, image: i}]}\n",
			allow: Confinement{PodSecurity: PodSecurityRestricted}, refused: `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`},
		{name: "a CronJob's hostPath", manifest: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: {spec: {volumes: [{name: h, hostPath: {path: /var}}]}}}}}\n",
			refused: `CronJob "c": violates PodSecurity "baseline:latest": hostPath volumes (volume "h")`},
		// Cluster-wide side effects.
		{name: "externalIPs", manifest: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {externalIPs: [10.0.0.1], ports: [{port: 80}]}\n",
			refused: `Service "s": spec.externalIPs is set`},
		{name: "externalIPs the watch allows", manifest: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {externalIPs: [10.0.0.1]}\n",
			allow: Confinement{AllowExternalIPs: true}},
		// References.
		{name: "a Secret volume of another's", manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: db, secret: {secretName: payments-db}}]}\n",
			refused: `spec.volumes[db].secret.secretName names the Secret "payments-db", which this release does not make, the watch's allowReads does not name (Secret/payments-db)`},
		{name: "a Secret volume of its own", manifest: ownDB + pod + "{containers: [{name: c, image: i}], volumes: [{name: db, secret: {secretName: own-db}}]}\n"},
		{name: "an env secretKeyRef of another's",
			manifest: deployOf + "{containers: [{name: app, image: i, env: [{name: PASSWORD, valueFrom: {secretKeyRef: {name: payments-db, key: password}}}]}]}}}\n",
			refused:  `spec.template.spec.containers[app].env[PASSWORD].valueFrom.secretKeyRef names the Secret "payments-db"`},
		{name: "an envFrom of an init container",
			manifest: pod + "{initContainers: [{name: init, image: i, envFrom: [{configMapRef: {name: other-config}}]}], containers: [{name: c, image: i}]}\n",
			refused:  `spec.initContainers[init].envFrom[0].configMapRef names the ConfigMap "other-config"`},
		{name: "a projected Secret the watch allows by name",
			manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: p, projected: {sources: [{secret: {name: shared-ca}}]}}]}\n",
			allow:    Confinement{AllowReads: []string{"Secret/shared-ca"}}},
		{name: "a claim of another's", manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: d, persistentVolumeClaim: {claimName: their-data}}]}\n",
			refused: `names the PersistentVolumeClaim "their-data"`},
		{name: "a pull Secret of another's", manifest: pod + "{imagePullSecrets: [{name: their-registry}], containers: [{name: c, image: i}]}\n",
			refused: `spec.imagePullSecrets[0].name names the Secret "their-registry"`},
		{name: "a release-named Secret the watch allows with <release>",
			manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: w, secret: {secretName: rel-admission}}]}\n",
			allow:    Confinement{AllowReads: []string{"Secret/<release>-admission"}}},
		{name: "a Secret that says it is meant for the CR",
			manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: db, secret: {secretName: shared-db}}]}\n", claimed: true},
		{name: "a ServiceAccount with another's pull Secret",
			manifest: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\nimagePullSecrets: [{name: their-registry}]\n",
			refused:  `ServiceAccount "sa": imagePullSecrets[0].name names the Secret "their-registry"`},
		{name: "a configMapKeyRef of an ephemeral container",
			manifest: pod + "{containers: [{name: c, image: i}], ephemeralContainers: [{name: dbg, image: i, env: [{name: X, valueFrom: {configMapKeyRef: {name: their-config, key: k}}}]}]}\n",
			refused:  `spec.ephemeralContainers[dbg].env[X].valueFrom.configMapKeyRef names the ConfigMap "their-config"`},
		{name: "a CSI volume's node publish Secret",
			manifest: pod + "{containers: [{name: c, image: i}], volumes: [{name: v, csi: {driver: d, nodePublishSecretRef: {name: their-creds}}}]}\n",
			refused:  `spec.volumes[v].csi.nodePublishSecretRef names the Secret "their-creds"`},
		{name: "a VPA of another team's StatefulSet",
			manifest: "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: v}\nspec: {targetRef: {apiVersion: apps/v1, kind: StatefulSet, name: db}}\n",
			refused:  `spec.targetRef names the StatefulSet "db"`},
		{name: "an Ingress's default backend of another's",
			manifest: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\nspec: {defaultBackend: {service: {name: payments, port: {number: 80}}}}\n",
			refused:  `spec.defaultBackend.service.name names the Service "payments"`},
		{name: "a Job's envFrom of another's",
			manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containers: [{name: c, image: i, envFrom: [{secretRef: {name: payments-db}}]}]}}}\n",
			refused:  `Job "j": spec.template.spec.containers[c].envFrom[0].secretRef names the Secret "payments-db"`},
		{name: "an HPA of another team's Deployment",
			manifest: "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: payments}, maxReplicas: 1}\n",
			refused:  `HorizontalPodAutoscaler "h": spec.scaleTargetRef names the Deployment "payments", which this release does not make, the watch's allowReads does not name (Deployment.apps/payments)`},
		{name: "an HPA of its own Deployment",
			manifest: ownApp + "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: app}, maxReplicas: 3}\n"},
		{name: "an Ingress to another's Service",
			manifest: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\nspec: {rules: [{http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: payments, port: {number: 80}}}}]}}]}\n",
			refused:  `spec.rules[0].http.paths[0].backend.service.name names the Service "payments"`},
		{name: "an Ingress's TLS Secret of another's",
			manifest: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\nspec: {tls: [{secretName: payments-tls}]}\n",
			refused:  `spec.tls[0].secretName names the Secret "payments-tls"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.allow
			c.Namespace = "tenant"
			rel := &release.Release{Name: "rel", Manifest: tt.manifest}
			reads := 0
			refs := func(gk schema.GroupKind, ns, name string) (bool, error) {
				reads++
				if ns != "tenant" {
					t.Errorf("read %s %s/%s outside the release's namespace", gk.Kind, ns, name)
				}
				return tt.claimed, nil
			}
			err := c.CheckObjectRules(rel, refs)
			var got []Violation
			if ce := (*ConfinementError)(nil); errors.As(err, &ce) {
				got = ce.Violations
			} else if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.refused == "" && len(got) > 0:
				t.Fatalf("refused: %v", got)
			case tt.refused != "" && (len(got) != 1 || !strings.Contains(got[0].String(), tt.refused)):
				t.Fatalf("got %v, want one violation with %q", got, tt.refused)
			}
			if tt.claimed && reads == 0 {
				t.Fatal("the claim was never read")
			}
		})
	}
}

// TestNeededBy: what scaffold writes for a chart's defaults: the least pod security level
// with why a stricter one refuses, the Services with externalIPs, and what the objects name
// that the release does not make, release-built names as <release>.
func TestNeededBy(t *testing.T) {
	rel := &release.Release{Name: "rel", Manifest: "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: exporter}\n" +
		"spec: {template: {spec: {hostNetwork: true, containers: [{name: c, image: i}], volumes: [{name: w, secret: {secretName: rel-admission}}, {name: ca, configMap: {name: shared-ca}}]}}}\n---\n" +
		"apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec: {externalIPs: [192.0.2.1]}\n"}
	got, err := NeededBy("tenant", rel)
	if err != nil {
		t.Fatal(err)
	}
	if got.PodSecurity != PodSecurityPrivileged || len(got.PodSecurityWhy) != 2 || !strings.Contains(got.PodSecurityWhy[1], "hostNetwork=true") {
		t.Errorf("pod security: %q, %q", got.PodSecurity, got.PodSecurityWhy)
	}
	if len(got.ExternalIPs) != 1 || got.ExternalIPs[0] != "Service lb" {
		t.Errorf("externalIPs: %v", got.ExternalIPs)
	}
	if len(got.Reads) != 2 || got.Reads["Secret/<release>-admission"] == nil || got.Reads["ConfigMap/shared-ca"] == nil {
		t.Errorf("reads: %v", got.Reads)
	}
}
