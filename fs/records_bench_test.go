package fs

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkWriteRecordSyncEvery is BenchmarkWriteRecord with every write
// synced (fdatasync and the records directory): what a checkpoint would
// cost if a power cut were to lose none (the default syncs a record at
// most once a second).
func BenchmarkWriteRecordSyncEvery(b *testing.B) {
	defer func(d time.Duration) { syncEvery = d }(syncEvery)
	syncEvery = 0
	dir := b.TempDir()
	rd := &Reader{Directory: dir}
	ctx := b.Context()
	name := newSegment(b, dir)
	data := bytes.Repeat([]byte("p"), 400)
	v, err := rd.WriteRecord(ctx, name, data, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		data[0] = byte(i)
		if v, err = rd.WriteRecord(ctx, name, data, v); err != nil {
			b.Fatal(err)
		}
	}
}
