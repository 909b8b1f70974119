package machine

import (
	rstatus "github.com/rudder-operator/rudder/api/status"
)

// writeRelease writes what the records of a pass's steps learned into status.release, the
// status of release relName, in their order.
func writeRelease(status *rstatus.Common, relName string, records []record) {
	for _, rec := range records {
		if rec.revision == nil && rec.failed == nil && !rec.clearFailed && rec.rollbackRequest == nil && rec.tested == nil &&
			rec.reconcileRequest == nil && rec.resetRequest == nil {
			continue
		}
		if status.Release == nil {
			status.Release = &rstatus.Release{Name: relName}
		}
		st := status.Release
		if r := rec.revision; r != nil {
			st.Name, st.Revision, st.Chart = relName, r.number, r.chart
			st.ChartDigest, st.ValuesDigest, st.RolledBackTo = r.chartDigest, r.valuesDigest, r.rolledBackTo
			if r.applied != nil {
				st.Applied = r.applied
			}
		}
		switch {
		case rec.failed != nil:
			st.Failed = &rec.failed.failed
		case rec.clearFailed:
			st.Failed = nil
		}
		if v := rec.rollbackRequest; v != nil {
			st.RollbackRequest = *v
		}
		if v := rec.reconcileRequest; v != nil {
			st.ReconcileRequest = *v
		}
		if v := rec.resetRequest; v != nil {
			st.ResetRequest = *v
		}
		if t := rec.tested; t != nil {
			st.Tested = t
		}
	}
}
