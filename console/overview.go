package console

import (
	"context"
	"net/http"
	"time"

	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// areaJSON counts the segments of an area (or of the claimed ones).
type areaJSON struct {
	Segments int    `json:"segments"`
	Records  uint64 `json:"records"`
	Bytes    int64  `json:"bytes"`
	Raw      uint64 `json:"raw"`
}

type overviewJSON struct {
	// Areas counts by area: ready (not claimed), claimed, quarantine,
	// archive (segments and bytes only: its records are not read).
	Areas    map[string]*areaJSON `json:"areas"`
	Oldest   string               `json:"oldest,omitempty"`
	OldestS  float64              `json:"oldest_age_s"`
	Damaged  int                  `json:"damaged"` // an unreadable header, or damaged blocks
	Unsealed int                  `json:"unsealed"`
	Reasons  chartJSON            `json:"by_reason"`
	Errors   chartJSON            `json:"by_error"`
	Charts   histProgress         `json:"charts"`
	Queue    *queueJSON           `json:"queue,omitempty"`
	Restorer *restorerJSON        `json:"restorer,omitempty"`
	Now      string               `json:"now"`
	Error    string               `json:"error,omitempty"`
}

type queueJSON struct {
	Records   uint64            `json:"records"`
	Segments  uint64            `json:"segments"`
	Stored    uint64            `json:"stored"`
	Pending   int64             `json:"pending_bytes"`
	Backlog   int64             `json:"backlog_bytes"`
	Refused   map[string]uint64 `json:"refused"`
	LastError string            `json:"last_error,omitempty"`
}

type restorerJSON struct {
	Ready       int     `json:"ready"`
	Claimed     int     `json:"claimed"`
	Quarantined int     `json:"quarantined"`
	OldestS     float64 `json:"oldest_ready_s"`
	Restored    uint64  `json:"restored"`
	Retried     uint64  `json:"retried"`
	QuarRecords uint64  `json:"quarantined_records"`
	Bytes       uint64  `json:"bytes"`
	LastError   string  `json:"last_error,omitempty"`
}

func (h *Handler) handleOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	now := time.Now()
	o := overviewJSON{Areas: map[string]*areaJSON{"ready": {}, "claimed": {}, "quarantine": {}, "archive": {}}, Now: inspect.JSONTime(now)}
	// Every segment's claim record: the held ones count as claimed, and a
	// restore's progress says which records of a segment it handled,
	// which stat, a search and api/count leave out, and so does this.
	claims, err := h.claims(ctx)
	if err != nil {
		o.Error = err.Error()
	}
	var counted []sink.Info
	var oldest time.Time
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		for si, err := range h.rd.List(ctx, area) {
			if err != nil {
				o.Error = err.Error()
				break
			}
			a := o.Areas[area.String()]
			if area == sink.AreaArchive {
				// Archived segments only grow: counted by the
				// listing, not read.
				a.Segments++
				a.Bytes += si.Size
				continue
			}
			s := h.summary(ctx, si, nil)
			cv := claims[si.Name]
			if area == sink.AreaReady && cv != nil && cv.Rec.Held() {
				a = o.Areas["claimed"]
			}
			records, minT := s.Records, s.MinT
			if cv.Started() && s.Read {
				// Partly restored: what is left of it is read (once
				// for each progress it has).
				if sh, ok := h.histOf(ctx, si, cv); ok {
					records, minT = sh.records, time.Time{}
					if sh.records > 0 {
						minT = time.Unix(0, sh.oldest).UTC()
					}
				}
			}
			a.Segments++
			a.Records += records
			a.Bytes += si.Size
			a.Raw += s.Raw
			if !s.Read || inspect.CountBlockDamage(s.Damage) > 0 {
				o.Damaged++
			}
			if s.Read && !s.Sealed {
				o.Unsealed++
			}
			if area == sink.AreaReady && records > 0 && (oldest.IsZero() || minT.Before(oldest)) {
				oldest = minT
			}
			counted = append(counted, si)
		}
	}
	if !oldest.IsZero() {
		o.Oldest = inspect.JSONTime(oldest)
		o.OldestS = now.Sub(oldest).Seconds()
	}
	charts, p := h.charts(ctx, counted, claims, h.o.SearchBudget)
	o.Reasons, o.Errors, o.Charts = charts[dimReason], charts[dimError], p
	if h.o.Queue != nil {
		st := h.o.Queue.Stats()
		o.Queue = &queueJSON{Records: st.Records, Segments: st.Segments, Stored: st.Stored, Pending: st.Pending, Backlog: st.Backlog,
			Refused: map[string]uint64{"closed": st.Refused.Closed, "encode": st.Refused.Encode, "too_large": st.Refused.TooLarge, "backpressure": st.Refused.Backpressure}}
		if st.LastError != nil {
			o.Queue.LastError = st.LastError.Error()
		}
	}
	if h.o.Restorer != nil {
		st := h.o.Restorer.Stats()
		o.Restorer = &restorerJSON{Ready: st.Ready, Claimed: st.Claimed, Quarantined: st.Quarantined, OldestS: st.OldestReady.Seconds(),
			Restored: st.Restored, Retried: st.Retried, QuarRecords: st.QuarantinedRecords, Bytes: st.Bytes}
		if st.LastError != nil {
			o.Restorer.LastError = st.LastError.Error()
		}
	}
	writeJSON(w, http.StatusOK, o)
}

// histOf returns the histogram of a segment with restore progress cv,
// counting it now if it is not kept; ok is false when it cannot be read.
func (h *Handler) histOf(ctx context.Context, si sink.Info, cv *inspect.Claim) (*segHist, bool) {
	k := histKeyOf(si, cv)
	if sh, ok := h.hist.get(k); ok {
		return sh, true
	}
	sh, err := h.count(ctx, si, cv)
	if err != nil {
		return nil, false
	}
	h.hist.put(k, sh)
	return sh, true
}

// claims returns the claim records of the store's segments, by name: one
// listing of the records, and a read of each.
func (h *Handler) claims(ctx context.Context) (map[string]*inspect.Claim, error) {
	out := map[string]*inspect.Claim{}
	for n, err := range h.rd.RecordNames(ctx) {
		if err != nil {
			return out, err
		}
		c, err := h.in.Inspect(ctx, sink.Info{Name: n, Area: sink.AreaReady})
		if err != nil {
			return out, err
		}
		if c != nil {
			out[n] = c
		}
	}
	return out, nil
}
