package brokers_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// Restore into any Watermill Publisher: Watermill's in-process GoChannel
// here.
func Example_watermill() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	if err := brokertest.Dump(dir, 3, 0, nil); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	msgs, err := pub.Subscribe(ctx, "orders.redrive")
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 3)
	go func() {
		for m := range msgs {
			m.Ack()
			got <- fmt.Sprint(string(m.Payload), " ", m.Metadata.Get("reason"), " ", m.Metadata.Get("replays"), " ", m.UUID != "")
		}
	}()
	var lines []string
	func() {
		// README:begin
		d := brokers.New(pub, "orders.redrive", nil) // pub: any message.Publisher
		defer d.Close()                              // closes pub
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Reader:          &fs.Reader{Directory: dir},
			Decoder:         decoder.Fallthrough{}, // the payloads' bytes as dumped
			Queue:           d,
			DeliverEnvelope: true, // the headers and the record's ID come along
		})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
			log.Fatal(err) // an unavailable broker: errors.Is(err, dlqdump.ErrUnavailable)
		}
		// README:end
		for range 3 { // before Close closes the subscription
			lines = append(lines, <-got)
		}
	}()
	for _, l := range lines {
		fmt.Println(l)
	}
	// Unordered output:
	// item-000000 failed 1 true
	// item-000001 failed 1 true
	// item-000002 failed 1 true
}
