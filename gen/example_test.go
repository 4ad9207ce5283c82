package gen_test

import (
	"encoding/json"
	"fmt"

	"github.com/dlqdump/dlqdump/gen"
)

func ExampleGenerator() {
	g := gen.New(1) // the same seed gives the same events
	events := g.Events(1000, 256)
	var size int
	for _, e := range events {
		size += len(e)
	}
	var first map[string]any
	_ = json.Unmarshal(events[0], &first)
	fmt.Println(len(events), "events of", size/len(events), "bytes on average; the first is", first["type"])
	// Output: 1000 events of 258 bytes on average; the first is payment.failed
}
