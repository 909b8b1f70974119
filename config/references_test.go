package config_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// TestReferencesHoldForEveryReleaseName (issue 63): the webstack chart names its objects with
// the fullname helper `helm create` writes, which drops "-webstack" when the release's name
// holds "webstack", and its pod template reads the Secret "<fullname>-redis", which it does not
// make. Under the watch `rudder scaffold` writes (it saw "<release>-webstack-redis"), CRs
// named sample, webstack-sample and webstack all install, as CR authors; a Secret the values
// add is refused for each, naming it.
func TestReferencesHoldForEveryReleaseName(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	s := serveScaffolded(t, compatCase{kind: "Webstack", chart: filepath.Join(root, "config", "testdata", "charts", "webstack")}, nil)
	gvk, ns := s.gvk, s.ns
	if s.name != "webstack-sample" {
		t.Fatalf("the sample is %s: the test wants one whose name holds the chart's", s.name)
	}
	author := crtest.Author(t, k8s, cluster.Config, ns, gvk.Group, "webstacks")
	for _, name := range []string{"sample", "webstack"} {
		if err := author.Create(ctx, crtest.NewCR(gvk, ns, name, nil)); err != nil {
			t.Fatal(err)
		}
	}
	refused := map[string]string{}
	for _, name := range []string{"sample", "webstack-sample", "webstack"} {
		extra := name + "-extra"
		refused[extra] = fmt.Sprintf("names the Secret %q", "other-db")
		if err := author.Create(ctx, crtest.NewCR(gvk, ns, extra, map[string]any{"extraEnvSecret": "other-db"})); err != nil {
			t.Fatal(err)
		}
	}
	// A values-added Secret named after the release is not the chart's either.
	refused["webstack-own"] = fmt.Sprintf("names the Secret %q", "webstack-own-other")
	if err := author.Create(ctx, crtest.NewCR(gvk, ns, "webstack-own", map[string]any{"extraEnvSecret": "webstack-own-other"})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sample", "webstack-sample", "webstack"} {
		crtest.WaitCondition(t, k8s, gvk, ns, name, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
		h := helmtest.History(t, cluster.Kubeconfig, ns, name)
		if len(h) != 1 || !strings.Contains(h[0].Manifest, "-redis") {
			t.Fatalf("%s: %d revisions, or the manifest reads no redis Secret", name, len(h))
		}
	}
	for name, says := range refused {
		u := crtest.WaitCondition(t, k8s, gvk, ns, name, "Stalled", metav1.ConditionTrue, "ChartInvalid", 2*time.Minute)
		if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, says) || !strings.Contains(msg, "allowReads") {
			t.Errorf("%s: Stalled does not say %q: %s", name, says, msg)
		}
		if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 0 {
			t.Errorf("%s: a refused install stored %d revisions", name, len(h))
		}
	}
}
