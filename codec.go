package dlqdump

// Encoder turns an item into bytes for the dump (seed: Encoder). Ready-made
// encoders are in the encoder package.
type Encoder interface {
	// Encode appends the encoding of x to dst and returns the extended
	// slice. An item of a type it cannot encode is an error naming the type.
	Encode(dst []byte, x any) ([]byte, error)
}

// Decoder turns bytes from the dump back into an item (seed: Decoder).
// Ready-made decoders are in the decoder package.
type Decoder interface {
	// Decode returns the item encoded in p. p is only valid during the
	// call: a decoder that keeps it (e.g. returns it as a []byte) must copy.
	Decode(p []byte) (any, error)
}
