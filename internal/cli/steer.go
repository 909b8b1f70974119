package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/machine"
)

// The verbs that steer a CR's release through the annotations rudder reads (machine's
// Annotation*): reconcile, suspend, resume and rollback. Each sets its annotation with a merge
// patch of the CR's metadata, the one path a person's kubectl annotate takes too, and, with
// --wait, waits for the pass that handled it, as status.release or a condition reports it.

// waitFlags are --wait and --timeout.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func addWaitFlags(cmd *cobra.Command, what string) *waitFlags {
	w := &waitFlags{}
	cmd.Flags().BoolVar(&w.wait, "wait", true, "wait for "+what)
	cmd.Flags().DurationVar(&w.timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return w
}

// steerer runs one steering verb on CRs of one kind.
type steerer struct {
	c    *cluster
	env  Env
	k    kind
	wait *waitFlags
}

// connectKind connects and resolves the verb's KIND argument.
func connectKind(cf *clusterFlags, env Env, kindArg string, w *waitFlags) (*steerer, error) {
	c, err := cf.connect()
	if err != nil {
		return nil, err
	}
	k, err := c.kind(kindArg)
	if err != nil {
		return nil, err
	}
	return &steerer{c: c, env: env, k: k, wait: w}, nil
}

// annotate sets (nil: removes) the annotations of CR name with one merge patch.
func (s *steerer) annotate(ctx context.Context, name string, set map[string]*string) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return nil, err
	}
	cr, err := s.c.namespaced(s.k).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("annotating %s %s/%s: %w", s.k.gvk.Kind, s.c.namespace, name, err)
	}
	return cr, nil
}

// until waits, within --timeout, for CR name to be as done says; done's error ends the wait.
func (s *steerer) until(ctx context.Context, name, what string, done func(cr *unstructured.Unstructured) (bool, error)) (
	*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, s.wait.timeout)
	defer cancel()
	ev, err := watchtools.UntilWithSync(ctx, s.c.listWatch(s.k, name), &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		cr, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%s was deleted", crName(cr))
		}
		return done(cr)
	})
	if errors.Is(err, watchtools.ErrWatchClosed) || errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		return nil, fmt.Errorf("%s %s/%s: timed out after %s waiting for %s", s.k.gvk.Kind, s.c.namespace, name, s.wait.timeout, what)
	}
	if err != nil {
		return nil, err
	}
	return ev.Object.(*unstructured.Unstructured), nil
}

// settled reports whether a pass of generation gen or later has ended on cr: Ready or Stalled,
// or a failure it retries (Reconciling with another reason than Progressing).
func settled(cr *unstructured.Unstructured) bool {
	conds := rstatus.ConditionsOf(cr)
	ready := meta.FindStatusCondition(conds, rstatus.TypeReady)
	if ready == nil || ready.ObservedGeneration < cr.GetGeneration() {
		return false
	}
	return ready.Status == metav1.ConditionTrue || ready.Reason != rstatus.ReasonProgressing
}

// outcome prints how cr stands after the pass the verb waited for, and is an error (exit 1)
// unless it is Ready.
func (s *steerer) outcome(cr *unstructured.Unstructured, did string) error {
	v := viewOf(cr)
	rev := 0
	if v.release != nil {
		rev = v.release.Revision
	}
	ready := meta.FindStatusCondition(v.conditions, rstatus.TypeReady)
	if ready != nil && ready.Status == metav1.ConditionTrue {
		fmt.Fprintf(s.env.Stdout, "%s %s: revision %d, Ready: %s\n", crName(cr), did, rev, oneLine(ready.Message))
		return nil
	}
	if ready == nil {
		return fmt.Errorf("%s %s, and is not Ready: no Ready condition", crName(cr), did)
	}
	return fmt.Errorf("%s %s, and is not Ready (%s): %s", crName(cr), did, ready.Reason, oneLine(ready.Message))
}

// reconcileCommand is `rudder reconcile KIND NAME`: Flux's `flux reconcile`.
func reconcileCommand(env Env) *cobra.Command {
	var reset bool
	var cf *clusterFlags
	var wf *waitFlags
	cmd := &cobra.Command{
		Use:   "reconcile KIND NAME",
		Short: "Reconcile a CR now, retrying a held-back release once (--reset: clear its failures first)",
		Long: `Reconcile a CR now: set rudder.dev/reconcile-at (--reset: rudder.dev/reset-at, which also
clears the failure history that holds a (chart, values) back) to the current time, and with
--wait (the default) wait for the pass that handled that value (status.release.reconcileRequest,
or resetRequest) and for its release to settle, then print the outcome.

Exit status: 0 when the CR is Ready, 1 when it is not (the reason is printed), it is suspended,
or the wait timed out; 2 for a command line it cannot run.`,
		Example: `  rudder reconcile nginxoperator web -n demo
  rudder reconcile at nightly -n demo --reset --timeout 2m`,
		Args:              exactArgs("KIND NAME", 2),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connectKind(cf, env, args[0], wf)
			if err != nil {
				return err
			}
			return s.reconcile(cmd.Context(), args[1], reset)
		},
	}
	cf = addClusterFlags(cmd, false)
	wf = addWaitFlags(cmd, "the pass and the release to settle")
	cmd.Flags().BoolVar(&reset, "reset", false, "clear the failure history first (rudder.dev/reset-at)")
	return cmd
}

func (s *steerer) reconcile(ctx context.Context, name string, reset bool) error {
	cr, err := s.c.get(ctx, s.k, name)
	if err != nil {
		return err
	}
	if viewOf(cr).suspended {
		return fmt.Errorf("%s is suspended (%s): resume it first (rudder resume %s %s)", crName(cr), machine.AnnotationPaused, s.k, name)
	}
	annotation := machine.AnnotationReconcileAt
	if reset {
		annotation = machine.AnnotationResetAt
	}
	value := s.env.now().UTC().Format(time.RFC3339Nano)
	if _, err := s.annotate(ctx, name, map[string]*string{annotation: &value}); err != nil {
		return err
	}
	fmt.Fprintf(s.env.Stderr, "%s: %s=%s\n", crName(cr), annotation, value)
	if !s.wait.wait {
		return nil
	}
	cr, err = s.until(ctx, name, "rudder to handle "+annotation, func(cr *unstructured.Unstructured) (bool, error) {
		rel := viewOf(cr).release
		if rel == nil {
			return false, nil
		}
		handled := rel.ReconcileRequest
		if reset {
			handled = rel.ResetRequest
		}
		return handled == value && settled(cr), nil
	})
	if err != nil {
		return err
	}
	return s.outcome(cr, "reconciled")
}

// exactArgs asks for n positional arguments, described as what.
func exactArgs(what string, n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("takes %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

// rollbackCommand is `rudder rollback KIND NAME REVISION`, through rudder.dev/rollback-to.
func rollbackCommand(env Env) *cobra.Command {
	var cf *clusterFlags
	var wf *waitFlags
	cmd := &cobra.Command{
		Use:   "rollback KIND NAME REVISION",
		Short: "Roll a CR's release back to a revision of its history (rudder.dev/rollback-to)",
		Long: `Roll a CR's Helm release back to REVISION (see rudder history): set rudder.dev/rollback-to,
which rudder acts on once per value, and with --wait (the default) wait for the outcome (the
RollbackRequest condition) and for the rolled-back release to settle. The rollback holds, like one made with helm rollback, until the
CR's spec or the chart changes.

Exit status: 0 when rudder rolled back, 1 when it refused (the reason is printed) or the wait
timed out; 2 for a command line it cannot run.`,
		Example:           `  rudder rollback nginxoperator web 3 -n demo`,
		Args:              exactArgs("KIND NAME REVISION", 3),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev, err := strconv.Atoi(args[2])
			if err != nil || rev <= 0 {
				return usagef("REVISION %q: must be a revision number (see rudder history)", args[2])
			}
			s, err := connectKind(cf, env, args[0], wf)
			if err != nil {
				return err
			}
			return s.rollback(cmd.Context(), args[1], rev)
		},
	}
	cf = addClusterFlags(cmd, false)
	wf = addWaitFlags(cmd, "rudder to roll back")
	return cmd
}

func (s *steerer) rollback(ctx context.Context, name string, rev int) error {
	cr, err := s.c.get(ctx, s.k, name)
	if err != nil {
		return err
	}
	if viewOf(cr).suspended {
		return fmt.Errorf("%s is suspended (%s): resume it first, or helm rollback by hand", crName(cr), machine.AnnotationPaused)
	}
	// Each value is acted on once: the time makes this request one of its own, also when an
	// earlier one asked for the same revision.
	value := machine.RollbackValue(rev, s.env.now())
	if _, err := s.annotate(ctx, name, map[string]*string{machine.AnnotationRollbackTo: &value}); err != nil {
		return err
	}
	fmt.Fprintf(s.env.Stderr, "%s: %s=%s\n", crName(cr), machine.AnnotationRollbackTo, value)
	if !s.wait.wait {
		return nil
	}
	cr, err = s.until(ctx, name, "rudder to handle "+machine.AnnotationRollbackTo, func(cr *unstructured.Unstructured) (bool, error) {
		rel := viewOf(cr).release
		if rel == nil || rel.RollbackRequest != value {
			return false, nil
		}
		// Refused, or rolled back and settled (the rolled-back revision's objects judged).
		c := meta.FindStatusCondition(rstatus.ConditionsOf(cr), rstatus.TypeRollbackRequest)
		return c == nil || c.Status != metav1.ConditionTrue || settled(cr), nil
	})
	if err != nil {
		return err
	}
	c := meta.FindStatusCondition(rstatus.ConditionsOf(cr), rstatus.TypeRollbackRequest)
	if c == nil || c.Status != metav1.ConditionTrue {
		msg := "no RollbackRequest condition"
		if c != nil {
			msg = c.Reason + ": " + c.Message
		}
		return fmt.Errorf("%s: rollback to revision %d refused: %s", crName(cr), rev, oneLine(msg))
	}
	fmt.Fprintf(s.env.Stdout, "%s rolled back to revision %d: now revision %d\n", crName(cr), rev, viewOf(cr).release.Revision)
	return nil
}

// suspendCommand is `rudder suspend` and resumeCommand `rudder resume`: rudder.dev/paused.
func suspendCommand(env Env, resume bool) *cobra.Command {
	var all bool
	var cf *clusterFlags
	var wf *waitFlags
	verb, short := "suspend", "Suspend CRs: no action on their releases until resumed (rudder.dev/paused)"
	if resume {
		verb, short = "resume", "Resume suspended CRs (remove rudder.dev/paused) and wait for their releases to settle"
	}
	cmd := &cobra.Command{
		Use:   verb + " KIND [NAME...]",
		Short: short,
		Long: short + `.

With --all, every CR of KIND in the namespace (-n). A suspended CR keeps its release as it
is: a spec or chart change waits, and a person may helm rollback by hand.

Exit status: 0, 1 when a CR could not be found or annotated (or, resuming with --wait, is not
Ready), 2 for a command line it cannot run.`,
		Example:           fmt.Sprintf("  rudder %s nginxoperator web -n demo\n  rudder %s application --all -n demo", verb, verb),
		Args:              needArgs("KIND"),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 1) {
				return usagef("name the CRs or give --all, not both")
			}
			s, err := connectKind(cf, env, args[0], wf)
			if err != nil {
				return err
			}
			return s.suspend(cmd.Context(), args[1:], all, resume)
		},
	}
	cf = addClusterFlags(cmd, false)
	cmd.Flags().BoolVar(&all, "all", false, "every CR of KIND in the namespace")
	if resume {
		wf = addWaitFlags(cmd, "each CR's pass after the resume and its release to settle")
	} else {
		wf = &waitFlags{}
	}
	return cmd
}

func (s *steerer) suspend(ctx context.Context, names []string, all, resume bool) error {
	if all {
		l, err := s.c.list(ctx, s.k)
		if err != nil {
			return err
		}
		for _, cr := range l.Items {
			names = append(names, cr.GetName())
		}
	}
	var value *string // nil removes the annotation
	did := "resumed"
	if !resume {
		value, did = new("true"), "suspended"
	}
	var errs []error
	for _, name := range names {
		cr, err := s.annotate(ctx, name, map[string]*string{machine.AnnotationPaused: value})
		if err == nil && resume && s.wait.wait {
			cr, err = s.until(ctx, name, "the pass after the resume", func(cr *unstructured.Unstructured) (bool, error) {
				c := meta.FindStatusCondition(rstatus.ConditionsOf(cr), rstatus.TypePaused)
				return (c == nil || c.Status != metav1.ConditionTrue) && settled(cr), nil
			})
			if err == nil {
				err = s.outcome(cr, did)
			}
		} else if err == nil {
			fmt.Fprintf(s.env.Stdout, "%s %s\n", crName(cr), did)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
