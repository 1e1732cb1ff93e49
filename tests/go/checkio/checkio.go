// Package checkio is what the check programs (franzcheck, saramacheck) share: their
// command line and their output, one JSON object per line that
// tests/ecosystem/test_go_clients.py reads. A failed step prints an "error" event
// naming the step and exits 1; bad arguments print the usage and exit 2.
package checkio

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// Emit prints one event as a JSON line.
func Emit(fields map[string]any) {
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

// Fail prints the "error" event of a failed step and exits 1.
func Fail(step string, err error) {
	Emit(map[string]any{"event": "error", "step": step, "error": err.Error()})
	os.Exit(1)
}

// Args reads the command line "PROGRAM BOOTSTRAP PREFIX BASE_MS SEED".
func Args(program string) (bootstrap, prefix string, base, seed int64) {
	if len(os.Args) != 5 {
		fmt.Fprintf(os.Stderr, "usage: %s BOOTSTRAP PREFIX BASE_MS SEED\n", program)
		os.Exit(2)
	}
	var err error
	if base, err = strconv.ParseInt(os.Args[3], 10, 64); err != nil {
		Fail("args", err)
	}
	if seed, err = strconv.ParseInt(os.Args[4], 10, 64); err != nil {
		Fail("args", err)
	}
	return os.Args[1], os.Args[2], base, seed
}
