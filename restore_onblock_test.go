package dlqdump_test

import (
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
)

type discardQueue struct{}

func (discardQueue) Enqueue(any) error { return nil }

// OnBlock is called after every block's checkpoint but the last block of the
// pass's last segment, whose counts Run returns: a restore job writes its
// record once less per pass (its end writes them).
func TestOnBlockSkipsThePassLastBlock(t *testing.T) {
	const per = 4
	mem := memsink.New()
	names, items := seedSegments(t, mem, 2, per, []int{3})
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: mem, Decoder: decoder.Fallthrough{AsString: true}, Queue: discardQueue{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []uint64
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{Segments: names, OnBlock: func(rep dlqdump.Report) error {
		seen = append(seen, rep.Delivered)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 5 || seen[4] != 5*per {
		t.Fatalf("OnBlock saw %v; want 5 calls (6 blocks, the last left out), the last at %d records", seen, 5*per)
	}
	if rep.Delivered != uint64(len(items)) {
		t.Fatalf("Run's report: %d delivered, want %d", rep.Delivered, len(items))
	}
}
