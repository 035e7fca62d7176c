// Command goclients runs the real Go Kafka clients (Sarama, kafka-go, franz-go) for
// streamapp's tests: their own partition functions as oracles, and their producers to
// seed topics on a real broker. Nothing here re-implements a hash: each partition comes
// from the library's own Partition/Balance method.
//
//	goclients list
//	goclients partition KEYS_FILE COUNTS OUT_FILE
//	goclients produce NAME BOOTSTRAP TOPIC RECORDS_FILE
//
// NAME is one of "list"'s client/partitioner names.
// KEYS_FILE has one hex key a line ("-" is a nil key, an empty line an empty key).
// RECORDS_FILE has "KEYHEX VALUEHEX" a line (same key conventions).
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "list":
		for _, o := range oracles() {
			fmt.Println(o.name)
		}
	case "partition":
		if len(os.Args) != 5 {
			usage()
		}
		err = partitionMode(os.Args[2], os.Args[3], os.Args[4])
	case "produce":
		if len(os.Args) != 6 {
			usage()
		}
		err = produceMode(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goclients:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goclients list | partition KEYS_FILE COUNTS OUT_FILE | produce NAME BOOTSTRAP TOPIC RECORDS_FILE")
	os.Exit(2)
}

// decodeKey turns one hex field into a key: "-" is nil (no key), "" a non-nil empty key.
func decodeKey(field string) ([]byte, error) {
	if field == "-" {
		return nil, nil
	}
	b, err := hex.DecodeString(field)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// readLines reads a file's lines, each split on spaces, keeping empty fields.
func readLines(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows [][]string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		rows = append(rows, strings.Split(scanner.Text(), " "))
	}
	return rows, scanner.Err()
}
