//go:build unix

package transform

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
)

// processCPU returns the CPU time the process used: on a machine shared
// with other work a steadier measure than the time elapsed.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// genEvent is one of gen's events (gen.New(1).Events), the payload of the
// root package's BenchmarkTransform.
const genEvent = `{"id":"evt_d452f5f6de33405d","ts":"2026-11-22T10:15:00.026Z","type":"payment.failed","user":{"id":5048945,"name":"Elena Dubois","email":"e.Dubois15@shop.example.org"},"amount":{"value":8813.28,"currency":"EUR"},"attempt":3,"error":"deadline exceeded","items":[]}`

// BenchmarkFastPath: one record of gen's events through the fast path and
// through gojq.
//
//	go test -run '^$' -bench BenchmarkFastPath ./transform
func BenchmarkFastPath(b *testing.B) {
	payload := []byte(genEvent)
	for _, tc := range []struct {
		name, prog string
		o          *Options
	}{{"fast", `.payload.user.email |= ascii_downcase`, nil}, {"fast-keep", `.payload.user.email |= ascii_downcase`, keepLayout},
		{"gojq", `.payload.user.email |= ascii_downcase | .`, nil}} {
		b.Run(tc.name, func(b *testing.B) {
			j, err := CompileJQ(tc.prog, tc.o)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				r := &dlqdump.Replay{Payload: payload, Headers: dlqdump.Headers{"reason": "failed"}}
				if err := j.Transform(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkScan: checking one of gen's events is one JSON value, by the
// fast path's scan (keep_scan.go) and by encoding/json.
//
//	go test -run '^$' -bench BenchmarkScan ./transform
func BenchmarkScan(b *testing.B) {
	payload := []byte(genEvent)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, ok := scanEdits(payload, nil, nil); !ok {
				b.Fatal("not JSON")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if !json.Valid(payload) {
				b.Fatal("not JSON")
			}
		}
	})
}
