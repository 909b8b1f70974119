package helmtest

import (
	"errors"
	"log/slog"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/rudder-operator/rudder/internal/records"
)

// Config is the Helm SDK's configuration for namespace ns of the cluster kubeconfig names, as
// the helm CLI builds it: what tests read and edit release history with.
func Config(t testing.TB, kubeconfig, ns string) *action.Configuration {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(ns)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// History is a release's revisions, oldest first, read as the helm CLI reads them (none:
// empty).
func History(t testing.TB, kubeconfig, ns, name string) []*release.Release {
	t.Helper()
	h, err := records.V1sOf(Config(t, kubeconfig, ns).Releases.History(name))
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("history of %s: %v", name, err)
	}
	return h
}
