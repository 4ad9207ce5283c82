// Command build-dlqdump builds the dlqdump command with the brokers
// module's URL schemes: restore --to and job run --to (and --dest
// NAME=URL) then take nats://HOST:PORT/SUBJECT (NATS JetStream) and
// kafka://HOST:PORT/TOPIC (Kafka) besides http:// and https://.
//
//	cd brokers
//	go run ./cmd/build-dlqdump -o ~/bin/dlqdump
//
// It is the same command, built from the same package, with one file more
// that imports the schemes' packages (see internal/clibuild): the dlqdump
// library's module keeps none of the brokers' dependencies.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/dlqdump/dlqdump/brokers/internal/clibuild"
)

func main() {
	out := flag.String("o", "dlqdump", "the binary to write")
	race := flag.Bool("race", false, "build with the race detector")
	flag.Parse()
	var flags []string
	if *race {
		flags = append(flags, "-race")
	}
	if err := clibuild.Build(context.Background(), "", *out, flags...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
