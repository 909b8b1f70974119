package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// getCommand is `rudder get [KIND [NAME]]`: the CRs of the kinds rudder serves, as Flux's
// `flux get helmreleases` shows its releases.
func getCommand(env Env) *cobra.Command {
	var output string
	var watchToo bool
	var cf *clusterFlags
	cmd := &cobra.Command{
		Use:   "get [KIND [NAME]]",
		Short: "List the CRs rudder serves: Ready, revision, chart, suspended, last action",
		Long: `List the CRs of every kind rudder serves (the CRDs of category "rudder": the built-in kinds'
and those 'rudder scaffold' writes), or of KIND, or one CR: whether it is Ready, the revision
of its Helm release, the chart as name-version@digest, whether it is suspended
(rudder.dev/paused), the last action on its release (the Released condition's reason) and its
age. KIND is named as kubectl takes it (NginxOperator, nginxoperators, at.cnat.ishankhare.dev).

Exit status: 0, 1 when the cluster could not be read or the CR does not exist, 2 for a
command line it cannot run.`,
		Example: `  rudder get -A
  rudder get nginxoperator -n demo -o wide
  rudder get at my-job -n demo -o yaml
  rudder get application -A -w`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "wide", "json", "yaml", "name":
			default:
				return usagef("-o %q: must be wide, json, yaml or name", output)
			}
			c, err := cf.connect()
			if err != nil {
				return err
			}
			kindArg, name := "", ""
			if len(args) > 0 {
				kindArg = args[0]
			}
			if len(args) > 1 {
				name = args[1]
			}
			g := &getter{c: c, env: env, output: output, showKind: kindArg == "", showNamespace: c.namespace == ""}
			return g.run(cmd.Context(), kindArg, name, watchToo)
		},
	}
	cf = addClusterFlags(cmd, true)
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide, json, yaml or name (default: a table)")
	cmd.Flags().BoolVarP(&watchToo, "watch", "w", false, "after the list, print each change (until interrupted)")
	return cmd
}

type getter struct {
	c                       *cluster
	env                     Env
	output                  string
	showKind, showNamespace bool
}

func (g *getter) run(ctx context.Context, kindArg, name string, watchToo bool) error {
	kinds, err := g.c.kinds(kindArg)
	if err != nil {
		return err
	}
	var items []unstructured.Unstructured
	if name != "" {
		cr, err := g.c.get(ctx, kinds[0], name)
		if err != nil {
			return err
		}
		items = append(items, *cr)
	} else {
		for _, k := range kinds {
			l, err := g.c.list(ctx, k)
			if err != nil {
				return err
			}
			items = append(items, l.Items...)
		}
	}
	if err := g.print(items); err != nil {
		return err
	}
	if !watchToo {
		return nil
	}
	return g.watch(ctx, kinds, name)
}

// print writes items as -o says.
func (g *getter) print(items []unstructured.Unstructured) error {
	out := g.env.Stdout
	switch g.output {
	case "json", "yaml":
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}, Items: items}
		var p printers.ResourcePrinter = &printers.JSONPrinter{}
		if g.output == "yaml" {
			p = &printers.YAMLPrinter{}
		}
		return p.PrintObj(list, out)
	case "name":
		for i := range items {
			if err := (&printers.NamePrinter{}).PrintObj(&items[i], out); err != nil {
				return err
			}
		}
		return nil
	}
	if len(items) == 0 {
		fmt.Fprintln(g.env.Stderr, "No CRs found.")
		return nil
	}
	tw := printers.GetNewTabWriter(out)
	g.header(tw)
	for i := range items {
		g.row(tw, &items[i])
	}
	return tw.Flush()
}

func (g *getter) header(tw io.Writer) {
	cols := []string{"NAME", "READY", "REVISION", "CHART", "SUSPENDED", "LAST ACTION", "AGE"}
	if g.output == "wide" {
		cols = append(cols, "MESSAGE")
	}
	if g.showKind {
		cols = append([]string{"KIND"}, cols...)
	}
	if g.showNamespace {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
}

// row is one CR as the table shows it.
func (g *getter) row(tw io.Writer, cr *unstructured.Unstructured) {
	v := viewOf(cr)
	ready, msg := "Unknown", ""
	if c := meta.FindStatusCondition(v.conditions, rstatus.TypeReady); c != nil {
		ready, msg = string(c.Status), c.Message
	}
	last := "-"
	if c := meta.FindStatusCondition(v.conditions, rstatus.TypeReleased); c != nil {
		last = c.Reason
	}
	revision, chart := "-", "-"
	if r := v.release; r != nil {
		revision = strconv.Itoa(r.Revision)
		if r.Chart != "" {
			chart = r.Chart
			if r.ChartDigest != "" {
				chart += "@" + records.DisplayDigest(r.ChartDigest)
			}
		}
	}
	cols := []string{cr.GetName(), ready, revision, chart, strconv.FormatBool(v.suspended), last,
		duration.HumanDuration(g.env.now().Sub(cr.GetCreationTimestamp().Time))}
	if g.output == "wide" {
		cols = append(cols, oneLine(msg))
	}
	if g.showKind {
		cols = append([]string{cr.GetKind()}, cols...)
	}
	if g.showNamespace {
		cols = append([]string{cr.GetNamespace()}, cols...)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
}

// watch prints a row for each change of the CRs of kinds (of the one CR name), as `kubectl get
// -w` does, until ctx ends.
func (g *getter) watch(ctx context.Context, kinds []kind, name string) error {
	var mu sync.Mutex
	errs := make(chan error, len(kinds))
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Go(func() {
			seen := map[string]string{} // the version printed of each CR (the list's, at first)
			_, err := watchtools.UntilWithSync(ctx, g.c.listWatch(k, name), &unstructured.Unstructured{}, nil,
				func(ev watch.Event) (bool, error) {
					cr, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						return false, nil
					}
					key := cr.GetNamespace() + "/" + cr.GetName()
					if ev.Type != watch.Deleted && seen[key] == cr.GetResourceVersion() {
						return false, nil
					}
					seen[key] = cr.GetResourceVersion()
					mu.Lock()
					defer mu.Unlock()
					return false, g.printChange(cr)
				})
			if ctx.Err() == nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// printChange prints one changed CR as -o says.
func (g *getter) printChange(cr *unstructured.Unstructured) error {
	switch g.output {
	case "json", "yaml", "name":
		return g.print([]unstructured.Unstructured{*cr})
	}
	tw := printers.GetNewTabWriter(g.env.Stdout)
	g.row(tw, cr)
	return tw.Flush()
}

// listWatch lists and watches the CRs of k in the cluster's namespace (only name, if set).
func (c *cluster) listWatch(k kind, name string) cache.ListerWatcher {
	opts := func(o *metav1.ListOptions) {
		if name != "" {
			o.FieldSelector = "metadata.name=" + name
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			opts(&o)
			return c.namespaced(k).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			opts(&o)
			return c.namespaced(k).Watch(ctx, o)
		},
	}
}

// crView is what the verbs read of a CR: rudder's part of its status and its annotations.
type crView struct {
	conditions []metav1.Condition
	release    *rstatus.Release
	inventory  *rstatus.Inventory
	suspended  bool
}

func viewOf(cr *unstructured.Unstructured) crView {
	v := crView{conditions: rstatus.ConditionsOf(cr), inventory: rstatus.InventoryOf(cr),
		suspended: cr.GetAnnotations()[machine.AnnotationPaused] == "true"}
	if m, ok, _ := unstructured.NestedMap(cr.Object, "status", "release"); ok {
		var rel rstatus.Release
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &rel) == nil {
			v.release = &rel
		}
	}
	return v
}

// oneLine is msg on one line, for a table cell.
func oneLine(msg string) string { return strings.Join(strings.Fields(msg), " ") }
