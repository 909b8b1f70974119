package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// BuildInfo is what `rudder version` says of the binary: rudder's own version and commit, and
// the versions of what decides its behaviour (Go, the Helm SDK, the Kubernetes client).
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Helm      string `json:"helmSDK,omitempty"`
	ClientGo  string `json:"clientGo,omitempty"`
}

// version is rudder's version as the build names it (the Makefile: -ldflags -X with `git
// describe`); empty: the Go build information's.
var version string

// readBuildInfo is BuildInfo from the binary's build information ("(devel)" and no commit for
// a binary built without version control, as test binaries are).
func readBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{Version: cmp.Or(version, "(unknown)")}
	}
	info := BuildInfo{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if version != "" {
		info.Version = version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case "helm.sh/helm/v3", "helm.sh/helm/v4":
			info.Helm = d.Path + " " + d.Version
		case "k8s.io/client-go":
			info.ClientGo = d.Version
		}
	}
	return info
}

// versionCommand is `rudder version`.
func versionCommand(env Env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print rudder's version and what it is built with",
		Long: `Print rudder's version, the commit it is built from, and the versions of Go, the Helm SDK
and the Kubernetes client it is built with; -o json or -o yaml prints them as an object.`,
		Example: `  rudder version
  rudder version -o json`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			info := readBuildInfo()
			switch output {
			case "":
				fmt.Fprintf(env.Stdout, "rudder %s\n", info.Version)
				if info.Commit != "" {
					dirty := ""
					if info.Modified {
						dirty = " (modified)"
					}
					fmt.Fprintf(env.Stdout, "commit: %s%s\n", info.Commit, dirty)
				}
				fmt.Fprintf(env.Stdout, "go: %s\nhelm SDK: %s\nclient-go: %s\n", info.GoVersion, info.Helm, info.ClientGo)
			case "json":
				b, _ := json.MarshalIndent(info, "", "  ")
				fmt.Fprintf(env.Stdout, "%s\n", b)
			case "yaml":
				b, _ := yaml.Marshal(info)
				fmt.Fprint(env.Stdout, string(b))
			default:
				return usagef("--output %q: one of json, yaml", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print the version as an object")
	return cmd
}
