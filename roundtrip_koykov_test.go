package dlqdump_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/koykov/queue"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/fs"
)

// typedWorker is a koykov Worker of items of type T, as a user writes it:
// it takes x.(T) and sends it on got (a wrong type is sent as an error).
type typedWorker[T any] struct{ got chan any }

func (w typedWorker[T]) Do(x any) error {
	v, ok := x.(T)
	if !ok {
		var zero T
		w.got <- fmt.Errorf("the worker of %T items was given a %T", zero, x)
		return nil
	}
	w.got <- v
	return nil
}

// roundTrip dumps items with enc, restores them with dec into a real koykov
// queue whose worker takes T, and checks that the worker got every item, as
// it went in.
func roundTrip[T any](t *testing.T, enc dlqdump.Encoder, dec dlqdump.Decoder, items []T, equal func(a, b T) bool) {
	t.Helper()
	dir := t.TempDir()
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}, Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := dump.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	got := make(chan any, len(items))
	q, err := queue.New(&queue.Config{Capacity: 1000, Workers: 1, Worker: typedWorker[T]{got}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: dec, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil || rep.Delivered != uint64(len(items)) {
		t.Fatalf("restored %d of %d: %v", rep.Delivered, len(items), err)
	}
	for i, want := range items {
		switch x := (<-got).(type) {
		case error:
			t.Fatalf("item %d: %v", i, x)
		case T:
			if !equal(x, want) {
				t.Fatalf("item %d: got %v, want %v", i, x, want)
			}
		}
	}
}

// Issue 20, defect 3: what a koykov worker gets back from the Restorer is
// what went into the dump, for every encoder/decoder pair of the README.
// decoder.JSONOf[Order]() gave *Order (the worker of Order crashed), and
// the README paired string items with decoder.Fallthrough{}, which gives
// []byte.
func TestRoundTripTypesThroughKoykov(t *testing.T) {
	orders := []order{{ID: "o-1", Amount: 10}, {ID: "o-2", Amount: 20}}
	t.Run("JSON *Order", func(t *testing.T) {
		roundTrip(t, encoder.JSON{}, decoder.JSONOf[*order](), []*order{&orders[0], &orders[1]},
			func(a, b *order) bool { return *a == *b })
	})
	t.Run("JSON Order", func(t *testing.T) {
		roundTrip(t, encoder.JSON{}, decoder.JSONOf[order](), orders, func(a, b order) bool { return a == b })
	})
	t.Run("protobuf", func(t *testing.T) {
		roundTrip(t, encoder.Marshaller{}, decoder.Proto[wrapperspb.StringValue](),
			[]*wrapperspb.StringValue{wrapperspb.String("o-1"), wrapperspb.String("o-2")},
			func(a, b *wrapperspb.StringValue) bool { return proto.Equal(a, b) })
	})
	t.Run("Builtin string", func(t *testing.T) {
		roundTrip(t, encoder.Builtin{}, decoder.Fallthrough{AsString: true}, []string{"o-1", "o-2"},
			func(a, b string) bool { return a == b })
	})
	t.Run("Builtin []byte", func(t *testing.T) {
		roundTrip(t, encoder.Builtin{}, decoder.Fallthrough{}, [][]byte{[]byte("o-1"), []byte("o-2")}, bytes.Equal)
	})
	t.Run("JSON []string", func(t *testing.T) {
		roundTrip(t, encoder.JSON{}, decoder.JSONOf[[]string](), [][]string{{"a"}, {"b", "c"}}, slices.Equal)
	})
}
