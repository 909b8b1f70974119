// Package release is rudder's own view of a Helm release revision: what the state machine, the
// Go hooks, the controllers and the command line read of a release, with no Helm type in it.
// The Helm layer (internal/helm) makes it from Helm's release (helm.View) and is the one
// package that reads back what it was made of (Release.Source); release storage
// (internal/records) reads rudder's facts from its labels. A move to another Helm SDK changes
// those packages, not the ones that decide.
package release

import (
	"fmt"
	"time"
)

// Status is a revision's status, as Helm's storage labels and `helm history` spell it.
type Status string

// Helm's release statuses (helm.sh/helm/v3/pkg/release, helm.sh/helm/v4/pkg/release/common:
// the same words in both).
const (
	StatusUnknown         Status = "unknown"
	StatusDeployed        Status = "deployed"
	StatusUninstalled     Status = "uninstalled"
	StatusSuperseded      Status = "superseded"
	StatusFailed          Status = "failed"
	StatusUninstalling    Status = "uninstalling"
	StatusPendingInstall  Status = "pending-install"
	StatusPendingUpgrade  Status = "pending-upgrade"
	StatusPendingRollback Status = "pending-rollback"
)

func (s Status) String() string { return string(s) }

// IsPending reports whether an operation holds the revision (Helm's lock).
func (s Status) IsPending() bool {
	return s == StatusPendingInstall || s == StatusPendingUpgrade || s == StatusPendingRollback
}

// Release is one revision of a release.
type Release struct {
	Name      string
	Namespace string
	// Version is the revision's number (Helm's word for it).
	Version     int
	Status      Status
	Description string
	// FirstDeployed, LastDeployed and Deleted are the revision's times (zero: not set).
	FirstDeployed, LastDeployed, Deleted time.Time
	// Chart is the chart the revision was made from (zero: none recorded).
	Chart Chart
	// Labels are the labels of the revision's record, rudder's facts among them
	// (records.HeadOf reads them).
	Labels map[string]string
	// Manifest is the rendered manifest, hooks excluded.
	Manifest string
	// Hooks are the chart's hooks as the revision rendered them, and how they last ran.
	Hooks []*Hook
	// ServerSideApply: the revision's objects were applied server-side (Helm 4's apply_method
	// "ssa"); else client-side, as every revision Helm 3 wrote. Drift is restored the same way.
	ServerSideApply bool
	// Source is the Helm release this view was made of, for the Helm layer alone (a
	// rollout's pinned chart, an unlock): nothing else may look inside. nil: none.
	Source any
}

// Chart names a chart.
type Chart struct {
	Name, Version, AppVersion string
}

// Ref is the chart as `helm list` shows it: name-version ("" for none).
func (c Chart) Ref() string {
	if c.Name == "" {
		return ""
	}
	return fmt.Sprintf("%s-%s", c.Name, c.Version)
}

// Hook is one hook of a revision.
type Hook struct {
	Name, Kind, Path string
	// Manifest is the hook's object, as rendered.
	Manifest string
	// Events are the hook's events ("pre-install", "test", …), as the chart's annotation
	// spells them.
	Events []string
	Weight int
	// DeletePolicies are the hook's delete policies ("before-hook-creation", …).
	DeletePolicies []string
	// LastRun is how the hook ran last (zero: never).
	LastRun HookRun
}

// HookRun is one run of a hook.
type HookRun struct {
	StartedAt, CompletedAt time.Time
	// Phase is "Running", "Succeeded" or "Failed" ("" or "Unknown": not run).
	Phase string
	// End and Log are what the run that just ended read of a failed test Pod ("" otherwise,
	// and in a stored record): End how it ended (its phase, and how its container ended or
	// why it waits), Log the tail of its log ("log: …") or why there is none.
	End, Log string
}

// HasEvent reports whether the hook runs on event.
func (h *Hook) HasEvent(event string) bool {
	for _, e := range h.Events {
		if e == event {
			return true
		}
	}
	return false
}
