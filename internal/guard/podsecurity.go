package guard

import (
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Pod privileges: a CR author may hold no right to create Pods at all, and rudder creates
// them on her values. A namespace's Pod Security labels say what those who may create Pods
// there may do; they say nothing of what rudder lends to those who may not. So every pod
// template of a release — Pods and the built-in workload kinds, hooks included — is held to
// the Pod Security Standards level its watch names (podSecurity: privileged, baseline or
// restricted; default baseline), evaluated by Kubernetes' own implementation of the standards
// (k8s.io/pod-security-admission/policy, the checks the admission plugin makes), and refused
// in the standard's own words. The namespace's labels still apply on top, by the API server.

// The Pod Security Standards levels a watch may name.
const (
	PodSecurityPrivileged = string(psaapi.LevelPrivileged)
	PodSecurityBaseline   = string(psaapi.LevelBaseline)
	PodSecurityRestricted = string(psaapi.LevelRestricted)
	// DefaultPodSecurity is the level of a watch that names none.
	DefaultPodSecurity = PodSecurityBaseline
)

// PodSecurityLevels are the levels, least privileged first.
var PodSecurityLevels = []string{PodSecurityRestricted, PodSecurityBaseline, PodSecurityPrivileged}

// podEvaluator is Kubernetes' evaluator of the standards, built once: its checks are fixed.
var podEvaluator = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// podLevel is the level the release's confinement holds pod templates to.
func (rs *releaseSet) podLevel() string {
	if rs.c.PodSecurity == "" {
		return DefaultPodSecurity
	}
	return rs.c.PodSecurity
}

// podViolations decides the pod security rule for every pod template of one release; with
// needs, it notes the least level that admits them all instead.
func (rs *releaseSet) podViolations(needs *Needs) []Violation {
	var out []Violation
	for i, o := range rs.objs {
		md, spec, err := rs.pods[i].md, rs.pods[i].spec, rs.pods[i].err
		switch {
		case err != nil:
			out = append(out, o.violation("its pod template does not decode: "+err.Error()))
			continue
		case spec == nil:
			continue
		}
		if needs != nil {
			needs.notePodLevel(o, md, spec)
			continue
		}
		if why := evaluatePod(rs.podLevel(), md, spec); why != "" {
			out = append(out, o.violation(why+", and the watch's podSecurity is "+rs.podLevel()))
		}
	}
	return out
}

// notePodLevel raises needs.PodSecurity to the least level that admits one pod template.
func (needs *Needs) notePodLevel(o identityObject, md *metav1.ObjectMeta, spec *corev1.PodSpec) {
	for _, level := range PodSecurityLevels {
		why := evaluatePod(level, md, spec)
		if why == "" {
			if slices.Index(PodSecurityLevels, level) > slices.Index(PodSecurityLevels, needs.PodSecurity) {
				needs.PodSecurity = level
			}
			return
		}
		needs.PodSecurityWhy = append(needs.PodSecurityWhy, fmt.Sprintf("%s %s %s", o.obj.GetKind(), o.obj.GetName(), why))
	}
}

// evaluatePod says why level refuses a pod template, in the admission plugin's words; ""
// when it admits it.
func evaluatePod(level string, md *metav1.ObjectMeta, spec *corev1.PodSpec) string {
	ev, err := podEvaluator()
	if err != nil {
		return "the Pod Security Standards evaluator does not build: " + err.Error()
	}
	lv := psaapi.LevelVersion{Level: psaapi.Level(level), Version: psaapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, md, spec))
	if res.Allowed {
		return ""
	}
	return fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), res.ForbiddenDetail())
}
