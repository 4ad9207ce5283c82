package s3test_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// An in-process server, its bucket and a client for it.
func ExampleNewFake() {
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	client := srv.Client()
	key := s3test.UniquePrefix("example") + "hello.txt"
	if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: strings.NewReader("hello")}); err != nil {
		log.Fatal(err)
	}
	out, err := client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &srv.Bucket, Key: &key})
	if err != nil {
		log.Fatal(err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	fmt.Println(srv.Name, srv.Bucket, string(b))
	// Output: gofakes3 dlqdump-test hello
}

// A versitygw from the environment or started here; without one, a test
// skips with the error, which says how to get one.
func ExampleVersity() {
	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "my-tests"})
	if errors.Is(err, s3test.ErrNoVersity) {
		fmt.Println("skip:", err) // t.Skip(err) in a test
		return
	}
	if err != nil {
		log.Fatal(err) // t.Fatal(err) in a test
	}
	defer stop()
	_ = srv.Client()
}
