// Package checkio is what the check programs (franzcheck, saramacheck) share: their
// command line and their output, one JSON object per line that
// tests/ecosystem/test_go_clients.py reads. A failed step prints an "error" event
// naming the step and exits 1; bad arguments print the usage and exit 2.
package checkio

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"sort"
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

// Timestamps draws the CreateTime of every record a check program produces, in produce
// order (partition by partition, perPart each): base + [0, window), out of order, and
// about one in five equal to the one before it in its partition.
func Timestamps(seed, base, window int64, partitions, perPart int) []int64 {
	rng := rand.New(rand.NewSource(seed))
	var stamps []int64
	for p := 0; p < partitions; p++ {
		for i := 0; i < perPart; i++ {
			ts := base + rng.Int63n(window)
			if i > 0 && rng.Intn(5) == 0 {
				ts = stamps[len(stamps)-1] // equal timestamps, too
			}
			stamps = append(stamps, ts)
		}
	}
	return stamps
}

// Queries is every time a check program looks up offsets for, ascending: each produced
// timestamp, one ms after each, and one ms outside both ends of base + [0, window).
func Queries(stamps []int64, base, window int64) []int64 {
	queries := map[int64]bool{base - 1: true, base + window + 1: true}
	for _, ts := range stamps {
		queries[ts], queries[ts+1] = true, true
	}
	qs := make([]int64, 0, len(queries))
	for q := range queries {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i] < qs[j] })
	return qs
}
