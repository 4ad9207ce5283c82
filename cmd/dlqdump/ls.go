package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
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
state (ready, claimed by a restorer, quarantined, archived), data Version,
record count, raw (uncompressed) and stored bytes (the segment's size),
compression ratio (raw/stored), the time range of their records and whether
they are encrypted: "no", or the kinds of recipient their data key is
wrapped for (X25519, ssh-ed25519, dlqdump-kms, ...; ×N when several). Sealed
segments are described by their footer; unsealed ones are scanned. No key is
needed.

A segment that a restorer claimed, or partly restored, has a claim record:
the NOTE column says who wrote it last and when (by that host's clock), and
how many records were delivered and remain, e.g.
  released by orders-7f3a (written 2026-03-01T12:00:00Z); 4 delivered, 8 remaining
"claimed by" means a restorer holds the claim (or held it and has not been
seen gone: a claim not renewed within its lease is taken over by the next
restorer).

With --json, one JSON object per segment and line:
  {"name":"...","area":"ready","state":"ready","size":1234,"version":"1.0.0.0",
   "codec":"zstd","created":"...","encrypted":true,"recipients":["X25519"],
   "sealed":true,"blocks":1,"records":10,
   "raw_bytes":2048,"stored_bytes":1234,"ratio":1.66,"first":"...","last":"...",
   "reason":"(quarantined: why)","damage":["..."],"error":"..."}
and, for a segment with a claim record,
   "claim":{"owner":"orders-7f3a","state":"released","written":"...",
            "delivered":4,"quarantined":0,"skipped":0,"remaining":8}
(state is held, released, or quarantined for a segment a restorer moved to
quarantine after delivering part of it).

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
			sums, err := a.summarizeAll(l, infos)
			if err != nil {
				return err
			}
			return a.printLs(l, sums, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per segment and line")
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	return cmd
}

// summarizeAll summarizes segments, several at a time (S3 latency), in
// order, with their claim records.
func (a *app) summarizeAll(l *location, infos []sink.Info) ([]*summary, error) {
	claims, err := a.inspectAll(l, infos)
	if err != nil {
		return nil, err
	}
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
			out[i] = a.summarize(l, si, claims[si.Name])
		}()
	}
	wg.Wait()
	return out, nil
}

type lsJSON struct {
	Name        string             `json:"name"`
	Area        string             `json:"area"`
	State       string             `json:"state"`
	Size        int64              `json:"size"`
	Version     string             `json:"version,omitempty"`
	Codec       string             `json:"codec,omitempty"`
	Created     string             `json:"created,omitempty"`
	Encrypted   bool               `json:"encrypted"`
	Recipients  []string           `json:"recipients,omitempty"`
	Sealed      bool               `json:"sealed"`
	Blocks      int                `json:"blocks"`
	Records     uint64             `json:"records"`
	RawBytes    uint64             `json:"raw_bytes"`
	StoredBytes int64              `json:"stored_bytes"`
	Ratio       float64            `json:"ratio"`
	First       string             `json:"first,omitempty"`
	Last        string             `json:"last,omitempty"`
	Reason      string             `json:"reason,omitempty"`
	Claim       *inspect.ClaimJSON `json:"claim,omitempty"`
	Damage      []string           `json:"damage,omitempty"`
	Error       string             `json:"error,omitempty"`
}

func (a *app) printLs(l *location, sums []*summary, asJSON bool) error {
	var damaged, failed int
	t := newTable(3, 4, 5, 6)
	t.add("NAME", "STATE", "VERSION", "RECORDS", "RAW", "STORED", "RATIO", "FIRST", "LAST", "ENCRYPTED", "NOTE")
	for _, s := range sums {
		if len(s.Damage) > 0 {
			damaged++
			for _, d := range s.Damage {
				a.warnf("damage: %v", d)
			}
		}
		if s.Err != nil {
			failed++
			a.warnf("%v", s.Err)
		}
		if asJSON {
			j := lsJSON{
				Name: s.Info.Name, Area: s.Info.Area.String(), State: s.State(), Size: s.Info.Size,
				Sealed: s.Sealed, Blocks: s.Blocks, Records: s.Records, RawBytes: s.Raw, StoredBytes: s.Info.Size,
				Ratio: math.Round(s.Ratio()*100) / 100, First: jsonTime(s.MinT), Last: jsonTime(s.MaxT), Reason: s.Info.Reason,
			}
			if s.Read {
				j.Version = dlqdump.Version(s.Hdr.DataVersion).String()
				j.Codec = s.Hdr.Codec.String()
				j.Created = jsonTime(s.Hdr.Created)
				j.Encrypted, j.Recipients = s.Enc.On, s.Enc.Kinds
			}
			j.Claim = s.Claim.JSON(s.Records, s.Read)
			for _, d := range s.Damage {
				j.Damage = append(j.Damage, d.Error())
			}
			if s.Err != nil {
				j.Error = s.Err.Error()
			}
			if err := jsonLine(a.stdout, j); err != nil {
				return err
			}
			continue
		}
		version, records, raw, enc := "-", "-", "-", "-"
		if s.Read {
			version = dlqdump.Version(s.Hdr.DataVersion).String()
			records, raw = strconv.FormatUint(s.Records, 10), humanBytes(s.Raw)
			enc = s.Enc.String()
		}
		t.add(s.Info.Name, s.State(), version, records, raw, humanBytes(s.Info.Size), fmtRatio(s.Ratio()), fmtTime(s.MinT), fmtTime(s.MaxT), enc, note(s))
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
func note(s *summary) string {
	var parts []string
	switch {
	case s.Err != nil:
		parts = append(parts, "error: see above")
	case !s.Read:
		parts = append(parts, "damaged header")
	case !s.Sealed && inspect.CountBlockDamage(s.Damage) > 0:
		parts = append(parts, fmt.Sprintf("unsealed, %s", plural(inspect.CountBlockDamage(s.Damage), "damaged block")))
	case !s.Sealed:
		parts = append(parts, "unsealed")
	}
	if s.Claim != nil {
		parts = append(parts, s.Claim.Note(s.Info.Area, s.Records, s.Read))
	}
	return strings.Join(parts, "; ")
}
