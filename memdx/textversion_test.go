package memdx

import (
	"errors"
	"testing"
)

func TestParseTextVersion(t *testing.T) {
	if got := string(AppendTextVersion([]byte("x"))); got != "xversion\r\n" {
		t.Fatalf("AppendTextVersion = %q", got)
	}
	ok := "VERSION 1.6.18\r\n"
	for i := range len(ok) {
		n, v, err := ParseTextVersion([]byte(ok[:i]))
		if n != 0 || v != nil || err != nil {
			t.Fatalf("prefix %q: n %d, version %q, err %v: want more input", ok[:i], n, v, err)
		}
	}
	n, v, err := ParseTextVersion([]byte(ok + "tail"))
	if err != nil || n != len(ok) || string(v) != "1.6.18" || cap(v) != len(v) {
		t.Fatalf("%q: n %d, version %q (cap %d), err %v", ok, n, v, cap(v), err)
	}
	n, _, err = ParseTextVersion([]byte("SERVER_ERROR busy\r\n"))
	var te *TextError
	if !errors.As(err, &te) || te.Kind != "SERVER_ERROR" || te.Msg != "busy" || n != 19 {
		t.Fatalf("error line: n %d, err %v", n, err)
	}
	long := make([]byte, 600)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"VERSION\r\n", "VERSION 1\n", "STORED\r\n", "\r\n", string(long)} {
		n, v, err := ParseTextVersion([]byte(bad))
		if n != 0 || v != nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%.20q: n %d, version %q, err %v: want ErrMalformed", bad, n, v, err)
		}
	}
}
