// Package guardtest holds what the tests of the request guard and of the Helm layer render
// against without a cluster: a mapper of a few kinds, and a CRD whose kind a chart defines.
package guardtest

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Mapper serves the kinds the tests render: ConfigMap, Secret, Pod (namespaced), and
// Namespace, ClusterRole, CustomResourceDefinition (cluster-scoped). Any other kind is not
// served.
func Mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, meta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	return m
}

// GearCRD is the CRD of the kind Gear (example.com/v1) with scope (Namespaced, Cluster), as a
// chart's template defines it.
func GearCRD(scope string) string {
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\n" +
		"spec: {group: example.com, scope: " + scope +
		", names: {kind: Gear, plural: gears}, versions: [{name: v1, served: true, storage: true}]}\n"
}

// Gear is a Gear named g in namespace ns ("": the release's).
func Gear(ns string) string {
	return "apiVersion: example.com/v1\nkind: Gear\nmetadata: {name: g, namespace: '" + ns + "'}\n"
}
