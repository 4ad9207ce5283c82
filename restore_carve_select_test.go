package dlqdump_test

import (
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// A carving pass whose selection names its segment ("segment = NAME and
// batch = 0") does not carve: it delivers its records from the segment.
// Before, it carved them into a side segment under another name, which its
// selection then did not select: it ended with no error having delivered
// none of them, and so did every pass after.
func TestCarveSelectionNamingItsSegment(t *testing.T) {
	st := carveStore(t, 40, 2)
	name := st.Names(sink.AreaReady)[0]
	sel, err := selection.Parse(fmt.Sprintf("segment = %q and batch = 0", name), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newCarveDest(nil)
	rep, err := newRestorer(t, dlqdump.Config{Reader: st, Queue: c}).Run(t.Context(), dlqdump.RunOptions{Select: sel, Carve: true, Rate: 1000})
	if err != nil || rep.Delivered != 20 || rep.Carved != 0 {
		t.Fatalf("the pass: %+v, %v; want its 20 records delivered, none carved", rep, err)
	}
	rest := newCarveDest(nil)
	if _, err := newRestorer(t, dlqdump.Config{Reader: st, Queue: rest}).Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	onceEach(t, append(c.items(), rest.items()...), 40)
}
