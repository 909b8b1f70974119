package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
)

// treeCommand is `rudder tree KIND NAME`: the CR's inventory (status.inventory) with each
// object's kstatus, as `flux tree` shows what a Kustomization or HelmRelease manages.
func treeCommand(env Env) *cobra.Command {
	var output string
	var cf *clusterFlags
	cmd := &cobra.Command{
		Use:   "tree KIND NAME",
		Short: "The objects of a CR's release (status.inventory), each with its kstatus",
		Long: `The objects of the deployed revision of a CR's release, as status.inventory lists them,
each read from the cluster and judged by kstatus (Current, InProgress, Failed, NotFound, …),
the readiness rudder's Ready condition is made of, with kstatus's message when it is not
Current (-o json: always). A CR whose kind's schema keeps no inventory is shown from its
release's manifest (which needs the right to read the release's Secrets).

Exit status: 0, 1 when the CR cannot be read, 2 for a command line it cannot run.`,
		Example: `  rudder tree nginxoperator web -n demo
  rudder tree application shop -n demo -o json`,
		Args:              exactArgs("KIND NAME", 2),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usagef("-o %q: must be json", output)
			}
			s, err := connectKind(cf, env, args[0], nil)
			if err != nil {
				return err
			}
			return s.tree(cmd.Context(), args[1], output)
		},
	}
	cf = addClusterFlags(cmd, false)
	cmd.Flags().StringVarP(&output, "output", "o", "", "json (default: a tree)")
	return cmd
}

// treeEntry is one object of the tree, as -o json prints it.
type treeEntry struct {
	rstatus.InventoryEntry `json:",inline"`
	Status                 string `json:"status"`
	Message                string `json:"message,omitempty"`
}

// treeOf is the tree of a CR: its inventory's revision, count and objects.
type treeOf struct {
	Revision  int         `json:"revision"`
	Count     int         `json:"count"`
	Truncated bool        `json:"truncated,omitempty"`
	Objects   []treeEntry `json:"objects"`
}

func (s *steerer) tree(ctx context.Context, name, output string) error {
	cr, err := s.c.get(ctx, s.k, name)
	if err != nil {
		return err
	}
	inv, err := s.inventory(cr)
	if err != nil {
		return err
	}
	t := treeOf{Revision: inv.Revision, Count: inv.Count, Truncated: inv.Truncated, Objects: make([]treeEntry, 0, len(inv.Entries))}
	for _, e := range inv.Entries {
		st, msg := s.kstatus(ctx, e)
		t.Objects = append(t.Objects, treeEntry{InventoryEntry: e, Status: st, Message: msg})
	}
	if output == "json" {
		return printJSON(s.env, t)
	}
	ready := "Unknown"
	if c := meta.FindStatusCondition(rstatus.ConditionsOf(cr), rstatus.TypeReady); c != nil {
		ready = string(c.Status)
	}
	fmt.Fprintf(s.env.Stdout, "%s/%s (Ready: %s, revision %d)\n", cr.GetKind(), cr.GetName(), ready, t.Revision)
	for i, o := range t.Objects {
		branch := "├── "
		if i == len(t.Objects)-1 && !t.Truncated {
			branch = "└── "
		}
		where := o.Name
		if o.Namespace != "" && o.Namespace != cr.GetNamespace() {
			where = o.Namespace + "/" + o.Name
		}
		line := fmt.Sprintf("%s%s/%s  %s", branch, o.Kind, where, o.Status)
		if o.Message != "" && o.Status != status.CurrentStatus.String() {
			line += "  " + oneLine(o.Message)
		}
		fmt.Fprintln(s.env.Stdout, line)
	}
	if t.Truncated {
		fmt.Fprintf(s.env.Stdout, "└── … %d more (status.inventory lists %d)\n", t.Count-len(t.Objects), len(t.Objects))
	}
	return nil
}

// inventory is cr's status.inventory, or, for a kind whose schema keeps none, its release's
// newest manifest.
func (s *steerer) inventory(cr *unstructured.Unstructured) (*rstatus.Inventory, error) {
	if inv := viewOf(cr).inventory; inv != nil {
		return inv, nil
	}
	relName, err := releaseOf(cr)
	if err != nil {
		return nil, err
	}
	rel, err := helm.ReadLast(s.c.cs.CoreV1().Secrets(cr.GetNamespace()), relName)
	if err != nil {
		return nil, fmt.Errorf("%s: reading release %s: %w", crName(cr), relName, err)
	}
	if rel == nil {
		return nil, fmt.Errorf("%s: release %s has no revision", crName(cr), relName)
	}
	objs, err := helm.ParseIdentities(rel.Manifest, rel.Namespace, s.c.mapper)
	if err != nil {
		return nil, fmt.Errorf("%s: the manifest of release %s: %w", crName(cr), relName, err)
	}
	return rstatus.NewInventory(rel.Version, objs), nil
}

// kstatus reads the object e names and is kstatus's word on it.
func (s *steerer) kstatus(ctx context.Context, e rstatus.InventoryEntry) (string, string) {
	gvk := schema.FromAPIVersionAndKind(e.APIVersion, e.Kind)
	m, err := s.c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return status.UnknownStatus.String(), err.Error()
	}
	obj, err := s.c.dyn.Resource(m.Resource).Namespace(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return status.NotFoundStatus.String(), ""
	case err != nil:
		return status.UnknownStatus.String(), err.Error()
	}
	res, err := status.Compute(obj)
	if err != nil {
		return status.UnknownStatus.String(), err.Error()
	}
	return res.Status.String(), res.Message
}
