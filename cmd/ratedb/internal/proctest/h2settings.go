package proctest

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// AdvertisedMaxStreams connects to the HTTP/2 (gRPC, plaintext) server at
// addr and returns the SETTINGS_MAX_CONCURRENT_STREAMS of the SETTINGS
// frame the server sends first, and whether that frame holds one (an
// HTTP/2 server that advertises none allows any number). It reads the
// frame by hand (RFC 9113 §4.1, §6.5) rather than through an HTTP/2
// library the module does not require.
func AdvertisedMaxStreams(t testing.TB, addr string) (uint32, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The client preface and an empty SETTINGS frame.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatalf("write preface: %v", err)
	}
	var hdr [9]byte // length (24 bits), type, flags, stream id
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read the server's first frame: %v", err)
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if hdr[3] != 0x4 || n%6 != 0 {
		t.Fatalf("the server's first frame is not SETTINGS (type %d, length %d)", hdr[3], n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		t.Fatalf("read SETTINGS: %v", err)
	}
	var v uint32
	found := false
	for i := 0; i < n; i += 6 {
		if binary.BigEndian.Uint16(payload[i:]) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			v, found = binary.BigEndian.Uint32(payload[i+2:]), true
		}
	}
	return v, found
}
