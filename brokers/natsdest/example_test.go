package natsdest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/brokers/natsdest"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/destination"
	"github.com/dlqdump/dlqdump/fs"
)

// Restore into NATS JetStream: a stream must capture the subject.
func Example() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	store, _ := os.MkdirTemp("", "nats")
	defer os.RemoveAll(store)
	srv, err := brokertest.StartNATS(store)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Stream(&nats.StreamConfig{Name: "REDRIVE", Subjects: []string{"orders.redrive"}}); err != nil {
		log.Fatal(err)
	}
	if err := brokertest.Dump(dir, 100, 0, nil); err != nil {
		log.Fatal(err)
	}
	url := srv.URL() + "/orders.redrive" // nats://127.0.0.1:PORT/orders.redrive
	ctx := context.Background()
	func() {
		// README:begin
		d, err := natsdest.Open(url, &destination.Options{Timeout: 10 * time.Second})
		if err != nil {
			log.Fatal(err) // the URL is malformed; a server that is down is not an error here
		}
		defer d.Close()
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Reader:          &fs.Reader{Directory: dir},
			Decoder:         decoder.Fallthrough{},
			Queue:           d,
			DeliverEnvelope: true,
			Concurrency:     8, // publishes awaiting their PubAck at once
		})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()
		rep, err := r.Run(ctx, dlqdump.RunOptions{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("delivered", rep.Delivered)
		// README:end
	}()
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the stream holds", len(msgs))
	// Output:
	// delivered 100
	// the stream holds 100
}
