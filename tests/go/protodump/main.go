// Command protodump reads Prometheus' delimited protobuf exposition format on stdin with client_golang's own decoder
// (prometheus/common/expfmt) and writes each MetricFamily as one line of protojson, so that tests can compare what the
// exporter serves with what a Go client reads.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	decoder := expfmt.NewDecoder(bufio.NewReader(os.Stdin), expfmt.NewFormat(expfmt.TypeProtoDelim))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		family := &dto.MetricFamily{}
		if err := decoder.Decode(family); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			out.Flush()
			fmt.Fprintln(os.Stderr, "protodump:", err)
			os.Exit(1)
		}
		line, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(family)
		if err != nil {
			fmt.Fprintln(os.Stderr, "protodump:", err)
			os.Exit(1)
		}
		out.Write(line)
		out.WriteString("\n")
	}
}
