// A small web service with the usual mix of framework code on its hot paths (JSON, Regex, LINQ, hashing), for the
// overhead benchmark: `npm run bench overhead` measures its throughput under wrk with and without profcpu recording.
using System.Security.Cryptography;
using System.Text.RegularExpressions;

var builder = WebApplication.CreateSlimBuilder(args);
builder.Logging.ClearProviders();
var app = builder.Build();

var words = Enumerable.Range(0, 512).Select(i => $"item-{i:x4}-{(i * 7919) % 1000:d3}").ToArray();
var pattern = new Regex(@"^item-([0-9a-f]{4})-(\d{3})$", RegexOptions.Compiled);

app.MapGet("/json", () => new
{
    Time = DateTime.UnixEpoch,
    Items = words.Take(32).Select((w, i) => new { Name = w, Rank = i, Score = i * 1.5 }).ToArray(),
});
app.MapGet("/work", () =>
{
    var matched = words.Count(w => pattern.IsMatch(w) && int.Parse(pattern.Match(w).Groups[2].Value) > 500);
    var sorted = words.OrderByDescending(w => w.GetHashCode()).Take(16).ToList();
    var hash = Convert.ToHexString(SHA256.HashData(System.Text.Encoding.UTF8.GetBytes(string.Join(',', sorted))));
    return new { matched, first = sorted[0], hash };
});
app.Run();
