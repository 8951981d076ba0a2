// Command idleconns opens N keep-alive connections to a URL, sends one GET
// on each (so that each is a served keep-alive connection, not a fresh
// one), then leaves them idle until it gets SIGINT or SIGTERM: bench/proxy.sh
// measures the server's memory with them open. It prints "ready" once every
// connection has been answered.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	target := flag.String("url", "http://127.0.0.1:18081/info", "URL to GET on each connection")
	n := flag.Int("n", 10000, "connections")
	xff := flag.Bool("xff", true, "name a distinct peer per connection in X-Forwarded-For")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil {
		log.Fatal(err)
	}
	conns := make([]net.Conn, 0, *n)
	for i := range *n {
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			log.Fatalf("connection %d: %v", i, err)
		}
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
		if *xff {
			req += fmt.Sprintf("X-Forwarded-For: 13.%d.%d.1\r\n", i/256, i%256)
		}
		if _, err := fmt.Fprint(c, req+"\r\n"); err != nil {
			log.Fatalf("connection %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			log.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			log.Fatalf("connection %d: %s", i, resp.Status)
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	for _, c := range conns {
		c.Close()
	}
}
