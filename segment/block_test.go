package segment

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// TestReadBlock reads segments block by block into alternating Blocks and
// checks every record, in order and out of order, while the other Block is
// being filled.
func TestReadBlock(t *testing.T) {
	t.Parallel()
	recs := testRecords(400)
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{BlockSize: 2000}, recs)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: "blocks"})
		if err != nil {
			t.Fatal(err)
		}
		index := r.Footer().Blocks
		var blocks [2]Block
		var prev *Block
		next := 0
		for i := 0; ; i++ {
			b := &blocks[i%2]
			err := r.ReadBlock(b)
			if err == io.EOF {
				if i != len(index) {
					t.Fatalf("%s: EOF after %d blocks, want %d", codec, i, len(index))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			info := b.Info()
			if info.Offset != index[i].Offset || info.FirstSeq != uint64(next) || b.Len() != int(info.Count) {
				t.Fatalf("%s: block %d: %+v with %d records, index says %+v", codec, i, info, b.Len(), index[i])
			}
			if p := b.Next(); p.Offset != info.End() || p.Seq != info.FirstSeq+uint64(info.Count) {
				t.Fatalf("%s: block %d: Next() = %+v", codec, i, p)
			}
			// Backwards, then forwards.
			for j := b.Len() - 1; j >= 0; j-- {
				checkRecord(t, b.Record(j), uint64(next+j), &recs[next+j])
			}
			for j := range b.Len() {
				checkRecord(t, b.Record(j), uint64(next+j), &recs[next+j])
			}
			// The previous block's records are still intact.
			if prev != nil {
				first := int(prev.Info().FirstSeq)
				for j := range prev.Len() {
					checkRecord(t, prev.Record(j), uint64(first+j), &recs[first+j])
				}
			}
			prev = b
			next += b.Len()
		}
		if next != len(recs) {
			t.Fatalf("%s: %d records read, want %d", codec, next, len(recs))
		}

		// From the middle of a block, after Seek: the records from there.
		for _, k := range []int{0, 1, 5, int(index[3].FirstSeq) - 1, int(index[3].FirstSeq), len(recs) - 1} {
			r2, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			for range k {
				if _, err := r2.Next(); err != nil {
					t.Fatal(err)
				}
			}
			pos := r2.Pos()
			r3, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r3.Seek(pos); err != nil {
				t.Fatal(err)
			}
			var b Block
			got := k
			for {
				err := r3.ReadBlock(&b)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for j := range b.Len() {
					checkRecord(t, b.Record(j), uint64(got), &recs[got])
					got++
				}
			}
			if got != len(recs) {
				t.Fatalf("%s: resumed at record %d, read up to %d", codec, k, got)
			}
		}

		// A damaged block is reported and skipped.
		bad := slices.Clone(data)
		bad[index[2].Offset+BlockHeaderSize+1] ^= 4
		r4, err := NewReader(bytes.NewReader(bad), int64(len(bad)), &ReaderOptions{Name: "bad"})
		if err != nil {
			t.Fatal(err)
		}
		var b Block
		var seqs []uint64
		errs := 0
		for range 100 {
			err := r4.ReadBlock(&b)
			if err == io.EOF {
				break
			}
			if err != nil {
				checkCorruptError(t, err, "bad")
				if b.Len() != 0 {
					t.Fatalf("%s: a failed ReadBlock left %d records", codec, b.Len())
				}
				errs++
				continue
			}
			for j := range b.Len() {
				rec := b.Record(j)
				checkRecord(t, rec, rec.Seq, &recs[rec.Seq])
				seqs = append(seqs, rec.Seq)
			}
		}
		if errs != 1 || len(seqs) != len(recs)-int(index[2].Count) {
			t.Fatalf("%s: %d errors, %d records", codec, errs, len(seqs))
		}
	}
}
