package main

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
)

func newLsCmd(a *app) *cobra.Command {
	var (
		asJSON bool
		area   string
	)
	cmd := &cobra.Command{
		Use:   "ls LOCATION [SEGMENT...]",
		Short: "List segments: state, data version, records, sizes, time range",
		Long: `List the segments of a dump, oldest first within each area, with their
state (ready, claimed by a running restorer, quarantined, archived), data
Version, record count, raw (uncompressed) and stored bytes (the segment's
size), compression ratio (raw/stored) and the time range of their records.
Sealed segments are described by their footer; unsealed ones are scanned.

With --json, one JSON object per segment and line:
  {"name":"...","area":"ready","state":"ready","size":1234,"version":"1.0.0.0",
   "codec":"zstd","created":"...","sealed":true,"blocks":1,"records":10,
   "raw_bytes":2048,"stored_bytes":1234,"ratio":1.66,"first":"...","last":"...",
   "reason":"(quarantined: why)","claim":{...},"damage":["..."],"error":"..."}

Damage (an unreadable header, a missing footer, damaged blocks) is reported
on stderr, naming the segment and offset, and makes the exit status 3.`,
		Example: `  dlqdump ls /var/lib/app/dlq
  dlqdump ls s3://dead-letters/orders/ --area quarantine
  dlqdump ls /var/lib/app/dlq --json | jq -r 'select(.records > 0) | .name'`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			areas, err := areasFlag(cmd.Flags(), area, args[1:], "all")
			if err != nil {
				return err
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, areas, args[1:])
			if err != nil {
				return err
			}
			sums := a.summarizeAll(l, infos)
			return a.printLs(l, sums, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per segment and line")
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	return cmd
}

// summarizeAll summarizes segments, several at a time (S3 latency), in
// order.
func (a *app) summarizeAll(l *location, infos []dlqdump.SegmentInfo) []*summary {
	out := make([]*summary, len(infos))
	workers := 1
	if l.isS3() {
		workers = 8
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, si := range infos {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = a.summarize(l, si)
		}()
	}
	wg.Wait()
	return out
}

type lsClaimJSON struct {
	Owner       string `json:"owner"`
	Expires     string `json:"expires,omitempty"`
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined"`
}

type lsJSON struct {
	Name        string       `json:"name"`
	Area        string       `json:"area"`
	State       string       `json:"state"`
	Size        int64        `json:"size"`
	Version     string       `json:"version,omitempty"`
	Codec       string       `json:"codec,omitempty"`
	Created     string       `json:"created,omitempty"`
	Sealed      bool         `json:"sealed"`
	Blocks      int          `json:"blocks"`
	Records     uint64       `json:"records"`
	RawBytes    uint64       `json:"raw_bytes"`
	StoredBytes int64        `json:"stored_bytes"`
	Ratio       float64      `json:"ratio"`
	First       string       `json:"first,omitempty"`
	Last        string       `json:"last,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Claim       *lsClaimJSON `json:"claim,omitempty"`
	Damage      []string     `json:"damage,omitempty"`
	Error       string       `json:"error,omitempty"`
}

func (a *app) printLs(l *location, sums []*summary, asJSON bool) error {
	now := time.Now()
	var damaged, failed int
	t := newTable(3, 4, 5, 6)
	t.add("NAME", "STATE", "VERSION", "RECORDS", "RAW", "STORED", "RATIO", "FIRST", "LAST", "NOTE")
	for _, s := range sums {
		if len(s.damage) > 0 {
			damaged++
			for _, d := range s.damage {
				a.warnf("damage: %v", d)
			}
		}
		if s.err != nil {
			failed++
			a.warnf("%v", s.err)
		}
		if asJSON {
			j := lsJSON{
				Name: s.info.Name, Area: s.info.Area.String(), State: s.state(now), Size: s.info.Size,
				Sealed: s.sealed, Blocks: s.blocks, Records: s.records, RawBytes: s.raw, StoredBytes: s.info.Size,
				Ratio: math.Round(s.ratio()*100) / 100, First: jsonTime(s.minT), Last: jsonTime(s.maxT), Reason: s.info.Reason,
			}
			if s.read {
				j.Version = dlqdump.Version(s.hdr.DataVersion).String()
				j.Codec = s.hdr.Codec.String()
				j.Created = jsonTime(s.hdr.Created)
			}
			if c := s.info.Claim; c != nil {
				j.Claim = &lsClaimJSON{Owner: c.Owner, Expires: jsonTime(c.Expires), Delivered: c.Checkpoint.Delivered, Quarantined: c.Checkpoint.Quarantined}
			}
			for _, d := range s.damage {
				j.Damage = append(j.Damage, d.Error())
			}
			if s.err != nil {
				j.Error = s.err.Error()
			}
			if err := jsonLine(a.stdout, j); err != nil {
				return err
			}
			continue
		}
		version, records, raw := "-", "-", "-"
		if s.read {
			version = dlqdump.Version(s.hdr.DataVersion).String()
			records, raw = strconv.FormatUint(s.records, 10), humanBytes(s.raw)
		}
		t.add(s.info.Name, s.state(now), version, records, raw, humanBytes(s.info.Size), fmtRatio(s.ratio()), fmtTime(s.minT), fmtTime(s.maxT), s.note())
	}
	if !asJSON {
		dropEmptyLastColumn(t)
		if len(sums) == 0 {
			a.infof("no segments in %s", l)
		} else if err := t.write(a.stdout); err != nil {
			return err
		}
	}
	return readOutcome(failed, damaged, "")
}

// dropEmptyLastColumn removes the last column when only its title has
// text.
func dropEmptyLastColumn(t *table) {
	for _, r := range t.rows[1:] {
		if r[len(r)-1] != "" {
			return
		}
	}
	for i, r := range t.rows {
		t.rows[i] = r[:len(r)-1]
	}
}

// note says what is unusual about a segment, for the NOTE column.
func (s *summary) note() string {
	switch {
	case s.err != nil:
		return "error: see above"
	case !s.read:
		return "damaged header"
	case !s.sealed && len(s.damage) > 1:
		return fmt.Sprintf("unsealed, %s", plural(len(s.damage)-1, "damaged block"))
	case !s.sealed:
		return "unsealed"
	}
	if cp := checkpointOf(s.info); cp.Seq > 0 {
		return fmt.Sprintf("%d of %d restored", cp.Seq, s.records)
	}
	return ""
}
