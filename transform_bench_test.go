//go:build unix

package dlqdump_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/transform"
)

// BenchmarkTransform restores gen's realistic events (~260-byte JSON) with
// no transform, with a Go Transform that does nothing, with one fixing one
// field (on the bytes; and the payload decoded and encoded again with
// encoding/json), and with the
// jq program of that fix (on the fast path writing gojq's bytes or keeping
// the payload's layout, and on gojq; one record at a time and with
// TransformWorkers), side by side:
// what a transform costs per record against plain replay. It reports
// items/s and the process's CPU time per record (cpu-ns/op): on a machine
// shared with other work the latter is the steadier of the two.
//
//	for i in 1 2 3; do go test -run '^$' -bench BenchmarkTransform -benchtime 200000x -count 1 .; done
func BenchmarkTransform(b *testing.B) {
	lower := func(_ context.Context, r *dlqdump.Replay) error {
		var v map[string]any
		if err := json.Unmarshal(r.Payload, &v); err != nil {
			return err
		}
		if u, ok := v["user"].(map[string]any); ok {
			if e, ok := u["email"].(string); ok {
				u["email"] = string(bytes.ToLower([]byte(e)))
			}
		}
		p, err := json.Marshal(v)
		r.Payload = p
		return err
	}
	// The same fix on the bytes, without decoding the JSON: what the
	// Transform seam itself costs.
	inPlace := func(_ context.Context, r *dlqdump.Replay) error {
		i := bytes.Index(r.Payload, []byte(`"email":"`))
		if i < 0 {
			return nil
		}
		i += len(`"email":"`)
		for j := i; j < len(r.Payload) && r.Payload[j] != '"'; j++ {
			if c := r.Payload[j]; c >= 'A' && c <= 'Z' {
				r.Payload[j] = c + 'a' - 'A'
			}
		}
		return nil
	}
	// A Transform that changes nothing: what the seam costs alone (the
	// record's Replay, a copy of its headers, its ID).
	nop := func(context.Context, *dlqdump.Replay) error { return nil }
	jq, err := transform.CompileJQ(`.payload.user.email |= ascii_downcase`, nil)
	if err != nil {
		b.Fatal(err)
	}
	keep, err := transform.CompileJQ(`.payload.user.email |= ascii_downcase`, &transform.Options{KeepLayout: true})
	if err != nil {
		b.Fatal(err)
	}
	// The same program with a stage the fast path does not take ("."):
	// every record runs on gojq.
	gojq, err := transform.CompileJQ(`.payload.user.email |= ascii_downcase | .`, nil)
	if err != nil {
		b.Fatal(err)
	}
	workers := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name    string
		t       dlqdump.Transform
		workers int // RunOptions.TransformWorkers
	}{{"plain", nil, 0}, {"go-nop", nop, 0}, {"go-bytes", inPlace, 0}, {"go-json", lower, 0}, {"jq", jq.Transform, 0}, {"jq-ahead", jq.Transform, workers},
		{"jq-keep", keep.Transform, 0}, {"jq-keep-ahead", keep.Transform, workers},
		{"jq-gojq", gojq.Transform, 0}, {"jq-gojq-ahead", gojq.Transform, workers}} {
		b.Run(tc.name, func(b *testing.B) {
			dir, size := dumpGenEvents(b, b.N, dlqdump.Zstd)
			var n atomic.Int64
			r, err := dlqdump.NewRestorer(&dlqdump.Config{
				Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
				Queue: queueFunc(func(x any) error {
					// Checked in every variant, plain too: the check costs
					// them all the same.
					if upper := bytes.Contains(x.([]byte), []byte(`"email":"`+"e.D")); upper && tc.t != nil && tc.name != "go-nop" {
						b.Errorf("not transformed: %s", x)
					}
					n.Add(1)
					return nil
				}),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.SetBytes(size / int64(b.N))
			b.ReportAllocs()
			cpu := startCPU(b)
			rep, err := r.Run(context.Background(), dlqdump.RunOptions{Transform: tc.t, TransformWorkers: tc.workers})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu.stop()
			if n.Load() != int64(b.N) || rep.Quarantined != 0 {
				b.Fatalf("restored %d of %d, quarantined %d", n.Load(), b.N, rep.Quarantined)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}
