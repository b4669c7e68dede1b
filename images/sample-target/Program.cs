// The sample target of the container walk-through: keeps two cores busy in methods whose names are easy to find in
// a flame graph (a prime sieve, a Mandelbrot renderer, a string-hashing loop), prints "ready" once each has run,
// and runs until stopped, or with SAMPLE_TARGET_EXIT_AFTER=SECONDS exits by itself that long after "ready" (printing
// the CLOCK_MONOTONIC time it exits at, which perf's timestamps use too).
using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;

namespace SampleTarget;

public static class Program
{
    public static void Main()
    {
        using var warmedUp = new CountdownEvent(3);
        Start("primes", () => Work.Forever(PrimeSieve.CountPrimes, warmedUp));
        Start("mandelbrot", () => Work.Forever(Mandelbrot.Render, warmedUp));
        Start("hashing", () => Work.Forever(Hashing.HashWords, warmedUp));
        warmedUp.Wait();
        Console.WriteLine($"ready (pid {Environment.ProcessId})");
        if (!int.TryParse(Environment.GetEnvironmentVariable("SAMPLE_TARGET_EXIT_AFTER"), out var seconds))
        {
            Thread.Sleep(Timeout.Infinite);
        }
        Thread.Sleep(TimeSpan.FromSeconds(seconds));
        // Stopwatch reads CLOCK_MONOTONIC on Linux.
        var monotonic = (double)System.Diagnostics.Stopwatch.GetTimestamp() / System.Diagnostics.Stopwatch.Frequency;
        Console.WriteLine($"exiting at monotonic {monotonic:F6}");
    }

    private static void Start(string name, ThreadStart body) =>
        new Thread(body) { Name = name, IsBackground = true }.Start();
}

public static class Work
{
    // The results feed a checksum so the JIT cannot drop the work.
    public static long Checksum;

    public static void Forever(Func<long> work, CountdownEvent warmedUp)
    {
        Interlocked.Add(ref Checksum, work());
        warmedUp.Signal();
        while (true) Interlocked.Add(ref Checksum, work());
    }
}

public static class PrimeSieve
{
    public static long CountPrimes()
    {
        const int limit = 2_000_000;
        var composite = new bool[limit + 1];
        long count = 0;
        for (int i = 2; i <= limit; i++)
        {
            if (composite[i]) continue;
            count++;
            for (long j = (long)i * i; j <= limit; j += i) composite[j] = true;
        }
        return count;
    }
}

public static class Mandelbrot
{
    public static long Render()
    {
        long inside = 0;
        for (int y = 0; y < 200; y++)
            for (int x = 0; x < 300; x++)
                if (Escapes(-2.0 + x * 3.0 / 300, -1.0 + y * 2.0 / 200) == 0) inside++;
        return inside;
    }

    private static int Escapes(double cr, double ci)
    {
        double zr = 0, zi = 0;
        for (int i = 1; i <= 256; i++)
        {
            (zr, zi) = (zr * zr - zi * zi + cr, 2 * zr * zi + ci);
            if (zr * zr + zi * zi > 4) return i;
        }
        return 0;
    }
}

public static class Hashing
{
    private static readonly string[] Words = "the quick brown fox jumps over the lazy dog".Split(' ');

    public static long HashWords()
    {
        var seen = new Dictionary<string, int>();
        var text = new StringBuilder();
        for (int i = 0; i < 20_000; i++)
        {
            text.Clear().Append(Words[i % Words.Length]).Append(i);
            string key = text.ToString();
            seen[key] = seen.TryGetValue(key, out int n) ? n + 1 : 1;
        }
        return seen.Count;
    }
}
