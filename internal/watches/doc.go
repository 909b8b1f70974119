// Package watches loads watches.yaml: the list of GroupVersionKinds rudder reconciles, each with
// the chart that renders its operands and the options of its controller.
//
// It validates everything it can without a cluster (fields, templates, selectors, durations,
// chart directories) and names the entry and field in every error. It owns no runtime state.
package watches
