package chartsource

import (
	"fmt"
	"os"
	"path/filepath"

	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/rudder-operator/rudder/internal/render"
)

// The one way a chart is read, for the watcher's snapshots and for the CLI alike: its files
// read within its own directory (files.go), loaded by Helm, its schemas compiled with their
// references confined to the chart (render.CompileSchemas), and linted by Helm with that
// schema validation in place of Helm's own, which opens any file:// path and fetches any URL a
// $ref names.

// lintNamespace is the namespace Helm's lint renders a chart in, as `helm lint` does: a
// chart's lint does not depend on the CRs that will use it.
const lintNamespace = "default"

// Load loads the chart at path: a directory, read as the source reads it (nothing outside
// it), or a chart archive, which Helm reads in memory.
func Load(path string) (*chart.Chart, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		ch, err := loader.LoadFile(path)
		if err != nil {
			return nil, err
		}
		return ch, render.CompileSchemas(ch)
	}
	files, _, err := readTree(path)
	if err != nil {
		return nil, err
	}
	return loadFiles(files)
}

// loadFiles is Helm's load of files, and the compile of their schemas.
func loadFiles(files []*archive.BufferedFile) (*chart.Chart, error) {
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading: %w", err)
	}
	if err := render.CompileSchemas(ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// LintMessage is one finding of Helm's lint.
type LintMessage struct {
	// Severity is "error" (strict: Helm's warnings are errors too) or "info" (a severity Helm
	// did not name).
	Severity string
	// File is the file it is about: the chart's path, or a file in it.
	File string
	Err  error
}

// Lint is Helm's strict lint of the chart directory at path (`helm lint --strict`), with check
// on top of its defaults, read as Load reads it. A tree that cannot be read is one error.
func Lint(path string, check map[string]any) []LintMessage {
	var out []LintMessage
	for _, m := range lintDir(path, check) {
		sev := "info"
		switch m.Severity {
		case support.ErrorSev, support.WarningSev: // strict
			sev = "error"
		case support.InfoSev:
			continue
		}
		file := path
		if m.Path != "" {
			file = filepath.Join(path, m.Path)
		}
		out = append(out, LintMessage{Severity: sev, File: file, Err: m.Err})
	}
	return out
}

// lintDir is every message of Helm's lint of the chart directory at path.
func lintDir(path string, check map[string]any) []support.Message {
	files, _, err := readTree(path)
	if err != nil {
		return []support.Message{support.NewMessage(support.ErrorSev, "", err)}
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		// Helm's lint says what is wrong in the files' own terms (Chart.yaml's fields, ...);
		// the load's error is the message when it does not.
		msgs := lintFiles(nil, files, check)
		if !hasError(msgs) {
			msgs = append(msgs, support.NewMessage(support.ErrorSev, "", fmt.Errorf("loading: %w", err)))
		}
		return msgs
	}
	if err := render.CompileSchemas(ch); err != nil {
		return []support.Message{support.NewMessage(support.ErrorSev, "values.schema.json", err)}
	}
	return lintFiles(ch, files, check)
}

func hasError(msgs []support.Message) bool {
	for _, m := range msgs {
		if m.Severity >= support.ErrorSev {
			return true
		}
	}
	return false
}

// lintFiles lints the exact files ch was loaded from, from a private copy on disk (Helm's lint
// reads a directory), with Helm's schema validation off, and validates check over the defaults
// against the schemas of ch (when it loaded) instead.
func lintFiles(ch *chart.Chart, files []*archive.BufferedFile, check map[string]any) []support.Message {
	name := "chart"
	if ch != nil {
		name = ch.Name()
	}
	dir, err := materialize(files, name)
	if err != nil {
		return []support.Message{support.NewMessage(support.ErrorSev, "", err)}
	}
	defer os.RemoveAll(filepath.Dir(dir))
	msgs := lint.RunAll(dir, check, lintNamespace, lint.WithSkipSchemaValidation(true)).Messages
	if ch == nil {
		return msgs
	}
	vals, err := commonutil.CoalesceValues(ch, check)
	if err == nil {
		err = render.ValidateValues(ch, vals)
	}
	if err != nil {
		msgs = append(msgs, support.NewMessage(support.ErrorSev, "values.yaml", err))
	}
	return msgs
}
