package changelog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/fs"
)

// BenchmarkAppend appends to a change log in a directory: from one Log, and
// from eight Logs at once (as eight processes would), each over a Reader
// of its own.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 8} {
		b.Run(fmt.Sprintf("dir/appenders=%d", appenders), func(b *testing.B) {
			dir := b.TempDir()
			logs := make([]*changelog.Log, appenders)
			for i := range logs {
				logs[i] = open(b, &fs.Reader{Directory: dir})
			}
			var next atomic.Int64
			b.SetParallelism(max(1, appenders/2)) // GOMAXPROCS is 2 here: 8 goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := logs[int(next.Add(1)-1)%appenders]
				for pb.Next() {
					if _, err := l.Append(context.Background(), changelog.Entry{Actor: "bench", Action: changelog.ActionReplay, Scope: "records 0123456789abcdef01234567-42"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkVerify verifies a log of 10,000 entries in a directory.
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	l := open(b, &fs.Reader{Directory: dir})
	for i := range 10_000 {
		if _, err := l.Append(context.Background(), changelog.Entry{Actor: "bench", Action: changelog.ActionReplay, Scope: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		v, err := l.Verify(context.Background(), changelog.VerifyOptions{})
		if err != nil || v.Entries != 10_000 {
			b.Fatal(v, err)
		}
	}
}
