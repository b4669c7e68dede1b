// profcpu's .NET demo workload: `ProfcpuDemo [seconds]` burns one core in a few methods of the ProfcpuDemo namespace
// with distinctive names and different weights, some of them calling into the framework (sorting, string formatting,
// dictionaries) and allocating enough to keep the GC busy, so a flame graph shows app, framework and runtime frames.
// It prints its PID, then "ready" once every method has run once, and exits by itself after `seconds` (default 60), so
// a crashed profiler never leaves it burning a core. It does not ask for a perf map: `profcpu demo` switches the
// runtime's perf map on over the diagnostic socket, which is what the demo shows.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Text;

namespace ProfcpuDemo;

public static class Program
{
    public static int Main(string[] args)
    {
        double seconds = 60;
        if (args.Length > 0 && !double.TryParse(args[0], NumberStyles.Float, CultureInfo.InvariantCulture, out seconds))
        {
            Console.Error.WriteLine("usage: ProfcpuDemo [seconds]");
            return 2;
        }
        Console.Out.WriteLine(Environment.ProcessId);
        Console.Out.Flush();

        var clock = Stopwatch.StartNew();
        long sink = Workload.Round();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        while (clock.Elapsed.TotalSeconds < seconds) sink ^= Workload.Round();
        Console.Out.WriteLine($"done {sink & 0xFF}");
        return 0;
    }
}

/// One round (each method kept a frame of its own: no inlining), about 20 ms on a current core; measured with
/// profcpu: about 40% sorting, 30% sieve, 15% dictionary, 10% formatting, the rest the GC.
public static class Workload
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Round()
    {
        long sum = 0;
        sum += PrimeSieve.CountPrimes(2_000_000);
        sum += OrderBook.SortOrders(20_000);
        sum += InvoiceFormatter.FormatInvoices(1_200);
        sum += WordCounter.CountWords(12_000);
        return sum;
    }
}

/// Pure application code: the widest frame, with nothing beneath it but the method itself.
public static class PrimeSieve
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int CountPrimes(int limit)
    {
        var composite = new bool[limit + 1];
        int count = 0;
        for (int i = 2; i <= limit; i++)
        {
            if (composite[i]) continue;
            count++;
            for (long j = (long)i * i; j <= limit; j += i) composite[j] = true;
        }
        return count;
    }
}

/// Sorting with a comparison: the framework's introsort (ArraySortHelper) calling back into the app's comparer.
public static class OrderBook
{
    public readonly record struct Order(int Id, decimal Price, int Quantity);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long SortOrders(int count)
    {
        var orders = new Order[count];
        uint seed = 2166136261;
        for (int i = 0; i < count; i++)
        {
            seed = seed * 1664525 + 1013904223;
            orders[i] = new Order(i, (seed % 100_000) / 100m, (int)(seed >> 24));
        }
        Array.Sort(orders, CompareByPriceThenQuantity);
        return orders[count / 2].Id;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static int CompareByPriceThenQuantity(Order a, Order b)
    {
        int byPrice = a.Price.CompareTo(b.Price);
        return byPrice != 0 ? byPrice : a.Quantity.CompareTo(b.Quantity);
    }
}

/// String formatting and building: framework number formatting, StringBuilder, and garbage for the GC.
public static class InvoiceFormatter
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long FormatInvoices(int count)
    {
        var text = new StringBuilder();
        long length = 0;
        for (int i = 0; i < count; i++)
        {
            text.Clear();
            text.Append(string.Format(CultureInfo.InvariantCulture, "Invoice {0:D6} for {1} on {2:yyyy-MM-dd}: ", i, "customer-" + (i % 97), new DateTime(2024, 1, 1).AddDays(i % 365)));
            for (int line = 0; line < 5; line++)
                text.Append(CultureInfo.InvariantCulture, $"[{line}] {i * 1.37 + line:F2} x {line + 1} = {(i * 1.37 + line) * (line + 1):N2}; ");
            length += text.ToString().Length;
        }
        return length;
    }
}

/// Splitting text and counting words in a Dictionary: the framework's string hashing and lookups.
public static class WordCounter
{
    private static readonly string[] Words = { "perf", "flame", "graph", "stack", "frame", "sample", "runtime", "method", "profile", "cycle" };

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int CountWords(int sentences)
    {
        var counts = new Dictionary<string, int>(StringComparer.Ordinal);
        for (int s = 0; s < sentences; s++)
        {
            string sentence = string.Join(' ', Words[s % Words.Length], Words[(s * 7) % Words.Length], Words[(s * 3 + 1) % Words.Length], s.ToString(CultureInfo.InvariantCulture));
            foreach (string word in sentence.Split(' '))
                counts[word] = counts.TryGetValue(word, out int n) ? n + 1 : 1;
        }
        return counts.Count;
    }
}
