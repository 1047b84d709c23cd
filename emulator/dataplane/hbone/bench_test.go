package hbone

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// Each benchmark echoes a 1 KiB message: "new" opens a connection or stream
// per round trip, "reused" sends every round trip over one.

const benchMsgSize = 1 << 10

func benchRoundTrips(b *testing.B, dial func() (net.Conn, error)) {
	msg := make([]byte, benchMsgSize)
	b.Run("new", func(b *testing.B) {
		b.SetBytes(benchMsgSize)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c, err := dial()
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(b, c, msg)
			_ = c.Close()
		}
		reportRate(b)
	})
	b.Run("reused", func(b *testing.B) {
		c, err := dial()
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.SetBytes(benchMsgSize)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			roundTrip(b, c, msg)
		}
		reportRate(b)
	})
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "roundtrips/s")
	}
}

func BenchmarkDirectTCP(b *testing.B) {
	echo := startEcho(b)
	benchRoundTrips(b, func() (net.Conn, error) { return dialTCP(context.Background(), echo) })
}

func BenchmarkHBONE(b *testing.B) {
	m := newMesh(b)
	srv := serve(b, m, m.echo, toEcho(startEcho(b)))
	c := newClient(b)
	t := Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS(m.echo.ID), PoolKey: "bench"}
	benchRoundTrips(b, func() (net.Conn, error) { return c.Dial(context.Background(), t) })
}

func BenchmarkDoubleHBONE(b *testing.B) {
	m := newMesh(b)
	dst := serve(b, m, m.echo, toEcho(startEcho(b)))
	gw := serve(b, m, m.gw, func(ctx context.Context, _ *http.Request, _ string) (net.Conn, int, error) {
		u, err := dialTCP(ctx, dst.Addr().String())
		if err != nil {
			return nil, http.StatusBadGateway, err
		}
		return u, http.StatusOK, nil
	})
	c := newClient(b)
	outer := Target{Addr: gw.Addr().String(), Authority: echoHost, TLS: m.clientTLS(m.gw.ID), PoolKey: "bench"}
	inner := Target{
		Authority: echoHost,
		TLS:       m.clientTLS(m.echo.ID),
		Headers:   http.Header{HeaderForwardedNetwork: {network1}},
	}
	benchRoundTrips(b, func() (net.Conn, error) { return c.DialDouble(context.Background(), outer, inner) })
}
