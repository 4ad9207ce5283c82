package kafkadest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	_ "github.com/dlqdump/dlqdump/brokers/kafkadest" // registers kafka://
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/destination"
	"github.com/dlqdump/dlqdump/fs"
)

// Restore into Kafka, the destination opened by its URL.
func Example() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	store, _ := os.MkdirTemp("", "kafka")
	defer os.RemoveAll(store)
	k, err := brokertest.StartKafka(store, "orders.redrive")
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()
	if err := brokertest.Dump(dir, 100, 0, nil); err != nil {
		log.Fatal(err)
	}
	url := "kafka://" + k.Addr() + "/orders.redrive"
	ctx := context.Background()
	func() {
		// README:begin
		d, err := destination.Open(ctx, url, nil) // kafka://HOST:PORT[,HOST:PORT...]/TOPIC
		if err != nil {
			log.Fatal(err)
		}
		defer d.Close()
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Reader:          &fs.Reader{Directory: dir},
			Decoder:         decoder.Fallthrough{},
			Queue:           d,
			DeliverEnvelope: true,
			Concurrency:     8,
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
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	msgs, err := k.ReadAll(rctx, "orders.redrive")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the topic holds", len(msgs))
	// Output:
	// delivered 100
	// the topic holds 100
}
