module github.com/dlqdump/dlqdump

go 1.26.8

require (
	github.com/klauspost/compress v1.20.3
	github.com/koykov/queue v1.1.6
	google.golang.org/protobuf v1.36.12
)

require github.com/koykov/bitset v1.0.0 // indirect
