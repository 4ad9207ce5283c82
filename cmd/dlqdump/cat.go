package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func newCatCmd(a *app) *cobra.Command {
	var (
		format    string
		area      string
		protoFile string
		protoMsg  string
		explain   bool
		ff        filterFlags
	)
	cmd := &cobra.Command{
		Use:   "cat LOCATION [SEGMENT...]",
		Short: "Print records as JSON lines (or hex, or raw payloads)",
		Long: `Print the records of a dump, oldest segment first, in the order they entered
each segment. Without segment names, the ready segments are printed (what
restore would redrive); --area chooses others. Named segments are looked for
in every area.

--select EXPR prints only the records the expression selects (see
docs/SELECT.md; --since, --until and --where add to it): segments, and
blocks of them, that their summaries rule out are not read. An expression
that names areas (area = quarantine) reads those without --area.
--explain says how the selection reads the dump (what each segment's
summary rules out) instead of printing records.

--format json (the default) prints one JSON object per record and line:
  {"id":"2c3d4e5f60718293a4b5c6d1-0","segment":"NAME","area":"ready","seq":0,
   "time":"2026-03-01T12:00:00.5Z","headers":{"reason":"failed"},"payload":"{\"id\":1}"}
id is the record's ID (dlqdump.RecordID): the same in every copy of the
record, and what --select 'id = ...' takes.
The payload is a string when it is valid, printable UTF-8 (tabs and line
breaks allowed), else base64 with "payload_base64":true. With
--proto-descriptor FILE (a FileDescriptorSet, as written by
protoc --include_imports --descriptor_set_out=FILE) and --proto-message NAME
(e.g. shop.v1.Order), payloads are parsed as that message and printed as
protojson objects; one that does not parse keeps its string or base64 form
and gets "payload_error".

--format hex prints a "# SEGMENT AREA #SEQ TIME KEY=VALUE..." line and a hex
dump per record; --format raw prints each payload followed by a newline (or,
with --proto-*, its protojson).

Damaged blocks are skipped and reported on stderr with the segment and
offset (exit status 3) after every intact record was printed.`,
		Example: `  dlqdump cat /var/lib/app/dlq | jq .payload
  dlqdump cat /var/lib/app/dlq --since 2h --where reason=failed --limit 10
  dlqdump cat /var/lib/app/dlq --select 'payload ~ "ord-0777777" or $.order.id = "ord-0777777"'
  dlqdump cat /var/lib/app/dlq --select 'reason = failed and time >= now-2h' --explain
  dlqdump cat /var/lib/app/dlq 20261122T101500.123456789Z-0123456789abcdef.dlq --format hex
  dlqdump cat s3://dead-letters/orders/ --proto-descriptor orders.pb --proto-message shop.v1.Order`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			switch format {
			case "json", "hex", "raw":
			default:
				return usageErrorf("--format %q: want json, hex or raw", format)
			}
			flt, err := ff.parse(time.Now())
			if err != nil {
				return err
			}
			areas, err := flt.areas(cmd.Flags(), area, args[1:], "ready")
			if err != nil {
				return err
			}
			var pp *protoPrinter
			switch {
			case (protoFile == "") != (protoMsg == ""):
				return usageErrorf("--proto-descriptor and --proto-message go together")
			case protoFile != "" && format == "hex":
				return usageErrorf("--proto-descriptor applies to --format json and raw, not hex")
			case protoFile != "":
				if pp, err = loadProto(protoFile, protoMsg); err != nil {
					return err
				}
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			names := args[1:]
			if only, ok := flt.sel.Segments(); ok && len(names) == 0 {
				names = only // read those, not the listing
				if !cmd.Flags().Changed("area") && !flt.sel.NamesArea() {
					areas = allAreas
				}
			}
			infos, err := a.list(l, areas, names)
			if err != nil {
				return err
			}
			if explain {
				return a.explain(l, infos, flt)
			}
			if err := a.cat(l, infos, flt, format, pp); err != nil {
				return err
			}
			if len(infos) == 0 && len(names) == 0 && !cmd.Flags().Changed("area") && !flt.sel.NamesArea() {
				a.quarantineHint(l, args[0])
			}
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&format, "format", "json", "json, hex or raw")
	fl.StringVar(&area, "area", "ready", "ready, quarantine, archive or all (default ready; all when segments are named)")
	fl.StringVar(&protoFile, "proto-descriptor", "", "FileDescriptorSet file (protoc --include_imports --descriptor_set_out) to print protobuf payloads")
	fl.StringVar(&protoMsg, "proto-message", "", "full name of the payloads' protobuf message, e.g. shop.v1.Order")
	fl.BoolVar(&explain, "explain", false, "say how the selection reads the dump (segments and blocks its summaries rule out) instead of printing records")
	ff.register(fl)
	return cmd
}

// recordJSON is one line of cat --format json.
type recordJSON struct {
	ID            string            `json:"id"`
	Segment       string            `json:"segment"`
	Area          string            `json:"area"`
	Seq           uint64            `json:"seq"`
	Time          string            `json:"time"`
	Headers       map[string]string `json:"headers"`
	Payload       any               `json:"payload"`
	PayloadBase64 bool              `json:"payload_base64,omitempty"`
	PayloadError  string            `json:"payload_error,omitempty"`
}

// errLimit ends a walk when --limit records were printed.
var errLimit = errors.New("limit reached")

func (a *app) cat(l *location, infos []sink.Info, flt *filter, format string, pp *protoPrinter) error {
	claimed, err := a.inspectAll(l, infos)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(a.stdout, 64<<10)
	var printed uint64
	var damaged int
	var failed []error
	var line bytes.Buffer
	for _, si := range infos {
		if a.interrupted() {
			break
		}
		segDamaged := false
		cv := claimed[si.Name]
		if h := cv.Handled(); h != "" {
			a.infof("%s: left out the records a restorer handled already (%s; see dlqdump ls)", si.Name, h)
		}
		_, err := a.walk(l, si, walkOpts{Select: flt.sel, Done: cv}, func(hdr *segment.Header, b *segment.Block) error {
			seg := inspect.SegmentOf(si, hdr)
			for i := range b.Len() {
				rec := b.Record(i)
				if cv.Skip(rec.Seq) || !flt.match(seg, &rec) {
					continue
				}
				if flt.limit > 0 && printed >= flt.limit {
					return errLimit
				}
				line.Reset()
				if err := formatRecord(&line, si, hdr, &rec, format, pp); err != nil {
					return err
				}
				if _, err := w.Write(line.Bytes()); err != nil {
					return err
				}
				printed++
			}
			return w.Flush()
		}, func(err error) {
			segDamaged = true
			_ = w.Flush()
			a.warnf("damage: %v", err)
		})
		if segDamaged {
			damaged++
		}
		if errors.Is(err, errLimit) {
			break
		}
		if err != nil {
			if a.interrupted() || isWriteErr(err) {
				return err
			}
			a.warnf("%v", err)
			failed = append(failed, err)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return readOutcome(len(failed), damaged, "the records of damaged blocks were not printed; ")
}

// isWriteErr reports whether err is a failed write to stdout.
func isWriteErr(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Op == "write"
}

// formatRecord appends one record, of the segment whose header is hdr, in
// the format to buf.
func formatRecord(buf *bytes.Buffer, si sink.Info, hdr *segment.Header, rec *segment.Record, format string, pp *protoPrinter) error {
	switch format {
	case "hex":
		fmt.Fprintf(buf, "# %s %s #%d %s id=%s", si.Name, si.Area, rec.Seq, rec.When().Format(time.RFC3339Nano), hdr.RecordID(rec))
		for k, v := range rec.Headers.All() {
			fmt.Fprintf(buf, " %s=%s", quoteIfNeeded(k), quoteIfNeeded(v))
		}
		buf.WriteString("\n")
		if len(rec.Payload) == 0 {
			buf.WriteString("(empty payload)\n")
		} else {
			buf.WriteString(hex.Dump(rec.Payload))
		}
		buf.WriteString("\n")
		return nil
	case "raw":
		if pp != nil {
			if js, _, err := pp.Format(rec.Payload); err == nil {
				buf.Write(js)
				buf.WriteString("\n")
				return nil
			}
		}
		buf.Write(rec.Payload)
		buf.WriteString("\n")
		return nil
	}
	j := recordJSON{
		ID:      hdr.RecordID(rec).String(),
		Segment: si.Name, Area: si.Area.String(), Seq: rec.Seq, Time: rec.When().Format(time.RFC3339Nano),
		Headers: inspect.HeadersMap(rec.Headers),
	}
	if pp != nil {
		js, warn, err := pp.Format(rec.Payload)
		if err == nil {
			j.Payload, j.PayloadError = json.RawMessage(js), warn
		} else {
			j.PayloadError = err.Error()
		}
	}
	if j.Payload == nil {
		j.Payload, j.PayloadBase64 = inspect.PayloadJSON(rec.Payload)
	}
	return jsonLine(buf, j)
}

// protoPrinter prints protobuf payloads of one message type as protojson.
type protoPrinter = inspect.Proto

// loadProto reads a FileDescriptorSet and finds the message named name (its
// full name, or a short name that is unique in the set).
func loadProto(file, name string) (*protoPrinter, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--proto-descriptor: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("--proto-descriptor %s: not a FileDescriptorSet (make one with protoc --include_imports --descriptor_set_out=FILE): %w", file, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("--proto-descriptor %s: %w (was it made with --include_imports?)", file, err)
	}
	name = strings.TrimPrefix(name, ".")
	md, found := inspect.FindMessage(files, name)
	switch {
	case md != nil:
		return inspect.NewProto(files, md), nil
	case len(found) == 0:
		return nil, fmt.Errorf("--proto-message %s: no such message in %s", name, file)
	}
	return nil, fmt.Errorf("--proto-message %s: ambiguous in %s (%s, %s, ...): give the full name", name, file, found[0].FullName(), found[1].FullName())
}
