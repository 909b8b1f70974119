package machine

import (
	rstatus "github.com/rudder-operator/rudder/api/status"
)

// writeRelease writes what the pass's steps learned into status.release, in their order.
func (rp *reporter) writeRelease(o *outcome) {
	for _, rec := range o.records {
		if rec.revision == nil && rec.failed == nil && !rec.clearFailed && rec.rollbackRequest == nil && rec.tested == nil &&
			rec.reconcileRequest == nil && rec.resetRequest == nil {
			continue
		}
		st := rp.releaseStatus()
		if r := rec.revision; r != nil {
			st.Name, st.Revision, st.Chart = rp.relName, r.number, r.chart
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

// releaseStatus returns the status's release record, creating it.
func (rp *reporter) releaseStatus() *rstatus.Release {
	if rp.st.Release == nil {
		rp.st.Release = &rstatus.Release{Name: rp.relName}
	}
	return rp.st.Release
}
