package guard

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// References: what a release's objects name of other objects is a read or a write by someone
// other than rudder, and is confined like one. The kubelet reads the Secrets, ConfigMaps and
// PersistentVolumeClaims a Pod mounts or takes its environment from (and the pull Secrets it
// names) into the Pod; kube-controller-manager scales what an HPA's scaleTargetRef names; an
// Ingress controller sends traffic to the Services an Ingress names and serves its TLS Secrets;
// the kubelet pulls with a ServiceAccount's imagePullSecrets for its Pods. Each such name must
// be of an object the release makes, one the watch's allowReads names (as for lookups,
// lookups.go), or one that says it is meant for the release's CR with AnnotationValuesFor (as
// valuesFrom sources do) or that an earlier revision of the release made (AnnotationOwner). The
// last two are read from the API server (ReferenceReader).

// AnnotationValuesFor, on an object, names the CRs whose releases may read it although they
// did not make it: comma-separated "Kind.group/name" (for the core group, "Kind/name"), as
// `kubectl get` names them, for example "Application.apps.sunstrider.cn/payments". valuesFrom
// sources whose name comes from the CR carry it too.
const AnnotationValuesFor = "rudder.dev/values-for"

// Claims reports whether an object whose AnnotationValuesFor is annotation is meant for the
// CR named ref ("Kind.group/name").
func Claims(annotation, ref string) bool {
	for c := range strings.SplitSeq(annotation, ",") {
		if strings.TrimSpace(c) == ref {
			return true
		}
	}
	return false
}

// ClaimRef is the CR of gvk named name as AnnotationValuesFor names it.
func ClaimRef(gk schema.GroupKind, name string) string {
	return KindEntry(gk) + "/" + name
}

// KindEntry is gk as a watch's lists name a kind: "Kind" for the core group, else "Kind.group".
func KindEntry(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// ReferenceEntry is how allowReads names an object of kind gk named name.
func ReferenceEntry(gk schema.GroupKind, name string) string { return KindEntry(gk) + "/" + name }

// OwnRead is the entry of ChartOwnOf for an object of kind gk named name that the release's
// objects name.
func OwnRead(gk schema.GroupKind, name string) string { return "read:" + ReferenceEntry(gk, name) }

// reference is one name an object gives of another object of its namespace.
type reference struct {
	gk    schema.GroupKind
	name  string
	field string // where the object names it
}

var (
	secretKind    = schema.GroupKind{Kind: "Secret"}
	configMapKind = schema.GroupKind{Kind: "ConfigMap"}
	claimKind     = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	serviceKind   = schema.GroupKind{Kind: "Service"}
)

// referenceViolations decides the reference rule for the objects of one release.
func (rs *releaseSet) referenceViolations(env objectRules) ([]Violation, error) {
	var out []Violation
	for i, o := range rs.objs {
		if rs.pods[i].err != nil {
			continue // podViolations says its pod template does not decode
		}
		refs := references(o.obj, rs.pods[i].spec)
		ns := rs.namespace(o.obj)
		for _, ref := range refs {
			ok, err := rs.resolves(env, ns, ref)
			if err != nil {
				return nil, err
			}
			if ok {
				continue
			}
			entry := ReferenceEntry(ref.gk, ref.name)
			if env.needs != nil {
				if rs.c.Release != "" {
					entry = strings.ReplaceAll(entry, rs.c.Release, ReleasePlaceholder)
				}
				env.needs.Reads[entry] = append(env.needs.Reads[entry], o.obj.GetKind()+" "+o.obj.GetName()+" "+ref.field)
				continue
			}
			out = append(out, o.violation(fmt.Sprintf("%s names the %s %q, which this release does not make, the watch's allowReads does not name "+
				"(%s), "+
				"and which does not say it is meant for this CR (annotation %s)", ref.field, ref.gk.Kind, ref.name, entry, AnnotationValuesFor)))
		}
	}
	return out, nil
}

// resolves reports whether ref, named in namespace ns, may be named.
func (rs *releaseSet) resolves(env objectRules, ns string, ref reference) (bool, error) {
	if rs.makes(ref.gk, ns, ref.name) || rs.c.AllowsRead(ref.gk, ref.name) {
		return true, nil
	}
	if env.refs == nil || env.needs != nil {
		return false, nil
	}
	return env.refs(ref.gk, ns, ref.name)
}

// references are the objects o names in its namespace; pod is its pod template, decoded (nil:
// none).
func references(o *unstructured.Unstructured, pod *corev1.PodSpec) []reference {
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Kind == "HorizontalPodAutoscaler" && gvk.Group == "autoscaling":
		return targetRef(o, "scaleTargetRef")
	case gvk.Kind == "VerticalPodAutoscaler" && gvk.Group == "autoscaling.k8s.io":
		return targetRef(o, "targetRef")
	case gvk.Kind == "Ingress" && gvk.Group == "networking.k8s.io":
		return ingressReferences(o)
	case gvk.Kind == "ServiceAccount" && gvk.Group == "":
		return serviceAccountReferences(o)
	case pod != nil:
		return podReferences(pod, strings.Join(podSpecPaths[gvk.Kind], "."))
	}
	return nil
}

// targetRef is the object an autoscaler's field names ({apiVersion, kind, name}).
func targetRef(o *unstructured.Unstructured, field string) []reference {
	ref, _, _ := unstructured.NestedStringMap(o.Object, "spec", field)
	if ref["name"] == "" || ref["kind"] == "" {
		return nil
	}
	gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
	return []reference{{schema.GroupKind{Group: gv.Group, Kind: ref["kind"]}, ref["name"], "spec." + field}}
}

// ingressReferences are the Services and other backends an Ingress sends traffic to, and the
// Secrets its TLS is served with.
func ingressReferences(o *unstructured.Unstructured) []reference {
	var out []reference
	backend := func(b map[string]any, field string) {
		if name, _, _ := unstructured.NestedString(b, "service", "name"); name != "" {
			out = append(out, reference{serviceKind, name, field + ".service.name"})
		}
		if r, ok, _ := unstructured.NestedStringMap(b, "resource"); ok && r["name"] != "" {
			out = append(out, reference{schema.GroupKind{Group: r["apiGroup"], Kind: r["kind"]}, r["name"], field + ".resource"})
		}
	}
	if b, ok, _ := unstructured.NestedMap(o.Object, "spec", "defaultBackend"); ok {
		backend(b, "spec.defaultBackend")
	}
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
	for i, r := range rules {
		paths, _, _ := unstructured.NestedSlice(asMap(r), "http", "paths")
		for j, p := range paths {
			if b, ok, _ := unstructured.NestedMap(asMap(p), "backend"); ok {
				backend(b, fmt.Sprintf("spec.rules[%d].http.paths[%d].backend", i, j))
			}
		}
	}
	tls, _, _ := unstructured.NestedSlice(o.Object, "spec", "tls")
	for i, t := range tls {
		if name, _, _ := unstructured.NestedString(asMap(t), "secretName"); name != "" {
			out = append(out, reference{secretKind, name, fmt.Sprintf("spec.tls[%d].secretName", i)})
		}
	}
	return out
}

// serviceAccountReferences are the Secrets a ServiceAccount hands its Pods: the kubelet pulls
// their images with its imagePullSecrets.
func serviceAccountReferences(o *unstructured.Unstructured) []reference {
	var out []reference
	for _, field := range []string{"imagePullSecrets", "secrets"} {
		list, _, _ := unstructured.NestedSlice(o.Object, field)
		for i, s := range list {
			if name, _, _ := unstructured.NestedString(asMap(s), "name"); name != "" {
				out = append(out, reference{secretKind, name, fmt.Sprintf("%s[%d].name", field, i)})
			}
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// podReferences are the Secrets, ConfigMaps and PersistentVolumeClaims a pod spec at path
// names: its volumes (and the Secrets of volume plugins), its containers' environment, its
// pull Secrets.
func podReferences(spec *corev1.PodSpec, path string) []reference {
	var out []reference
	add := func(gk schema.GroupKind, name, field string) {
		if name != "" {
			out = append(out, reference{gk, name, path + "." + field})
		}
	}
	for _, v := range spec.Volumes {
		at := fmt.Sprintf("volumes[%s]", v.Name)
		if s := v.Secret; s != nil {
			add(secretKind, s.SecretName, at+".secret.secretName")
		}
		if c := v.ConfigMap; c != nil {
			add(configMapKind, c.Name, at+".configMap.name")
		}
		if c := v.PersistentVolumeClaim; c != nil {
			add(claimKind, c.ClaimName, at+".persistentVolumeClaim.claimName")
		}
		if p := v.Projected; p != nil {
			for i, src := range p.Sources {
				if src.Secret != nil {
					add(secretKind, src.Secret.Name, fmt.Sprintf("%s.projected.sources[%d].secret.name", at, i))
				}
				if src.ConfigMap != nil {
					add(configMapKind, src.ConfigMap.Name, fmt.Sprintf("%s.projected.sources[%d].configMap.name", at, i))
				}
			}
		}
		for field, name := range volumePluginSecrets(v.VolumeSource) {
			add(secretKind, name, at+"."+field)
		}
	}
	for _, c := range containersOf(spec) {
		for _, e := range c.env {
			if vf := e.ValueFrom; vf != nil && vf.SecretKeyRef != nil {
				add(secretKind, vf.SecretKeyRef.Name, c.at+".env["+e.Name+"].valueFrom.secretKeyRef")
			}
			if vf := e.ValueFrom; vf != nil && vf.ConfigMapKeyRef != nil {
				add(configMapKind, vf.ConfigMapKeyRef.Name, c.at+".env["+e.Name+"].valueFrom.configMapKeyRef")
			}
		}
		for j, ef := range c.envFrom {
			if ef.SecretRef != nil {
				add(secretKind, ef.SecretRef.Name, fmt.Sprintf("%s.envFrom[%d].secretRef", c.at, j))
			}
			if ef.ConfigMapRef != nil {
				add(configMapKind, ef.ConfigMapRef.Name, fmt.Sprintf("%s.envFrom[%d].configMapRef", c.at, j))
			}
		}
	}
	for i, s := range spec.ImagePullSecrets {
		add(secretKind, s.Name, fmt.Sprintf("imagePullSecrets[%d].name", i))
	}
	return out
}

// containerEnv is where one container of a pod spec takes its environment from.
type containerEnv struct {
	at      string // "containers[name]"
	env     []corev1.EnvVar
	envFrom []corev1.EnvFromSource
}

// containersOf are the containers of every kind of a pod spec: init, regular and ephemeral.
func containersOf(spec *corev1.PodSpec) []containerEnv {
	var out []containerEnv
	for _, c := range spec.InitContainers {
		out = append(out, containerEnv{"initContainers[" + c.Name + "]", c.Env, c.EnvFrom})
	}
	for _, c := range spec.Containers {
		out = append(out, containerEnv{"containers[" + c.Name + "]", c.Env, c.EnvFrom})
	}
	for _, c := range spec.EphemeralContainers {
		out = append(out, containerEnv{"ephemeralContainers[" + c.Name + "]", c.Env, c.EnvFrom})
	}
	return out
}

// volumePluginSecrets are the Secrets volume plugins read to mount a volume, by field.
func volumePluginSecrets(v corev1.VolumeSource) map[string]string {
	out := map[string]string{}
	set := func(field string, ref *corev1.LocalObjectReference) {
		if ref != nil {
			out[field] = ref.Name
		}
	}
	if v.CSI != nil {
		set("csi.nodePublishSecretRef", v.CSI.NodePublishSecretRef)
	}
	if v.AzureFile != nil {
		out["azureFile.secretName"] = v.AzureFile.SecretName
	}
	if v.CephFS != nil {
		set("cephfs.secretRef", v.CephFS.SecretRef)
	}
	if v.Cinder != nil {
		set("cinder.secretRef", v.Cinder.SecretRef)
	}
	if v.FlexVolume != nil {
		set("flexVolume.secretRef", v.FlexVolume.SecretRef)
	}
	if v.ISCSI != nil {
		set("iscsi.secretRef", v.ISCSI.SecretRef)
	}
	if v.RBD != nil {
		set("rbd.secretRef", v.RBD.SecretRef)
	}
	if v.ScaleIO != nil {
		set("scaleIO.secretRef", v.ScaleIO.SecretRef)
	}
	if v.StorageOS != nil {
		set("storageos.secretRef", v.StorageOS.SecretRef)
	}
	return out
}
