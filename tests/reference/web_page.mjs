// The server's web page in a real browser: Debian's chromium, headless,
// driven by playwright-core. The page loads without console errors, a
// message streams an answer, and the status panel shows every rank.
//   node web_page.mjs BASE_URL API_KEY RANKS
import { chromium } from "playwright-core";

const [base, key, ranks] = process.argv.slice(2);
const fail = (what) => { console.error("FAIL: " + what); process.exit(1); };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.addInitScript((k) => localStorage.setItem("tps-key", k), key);
  await page.goto(base + "/", { waitUntil: "load" });

  // The status panel: one row per rank.
  await page.waitForFunction((n) => document.querySelectorAll("tr.rank").length === n, Number(ranks),
                             { timeout: 20000 }).catch(() => fail("the status panel does not show " + ranks + " ranks"));
  console.log("ok: the status panel shows " + ranks + " ranks");

  // A message streams an answer (reasoning or text) into the page.
  await page.fill("#input", "Hello there");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => {
    const msgs = document.querySelectorAll(".msg.assistant");
    const last = msgs[msgs.length - 1];
    return last && last.textContent.replace("assistant", "").replace("reasoning", "").trim().length > 0;
  }, null, { timeout: 60000 }).catch(() => fail("no answer streamed into the page"));
  await page.waitForFunction(() => !document.getElementById("send").disabled, null, { timeout: 120000 });
  const shown = await page.$eval("#error", (e) => e.textContent);
  if (shown) fail("the page shows an error: " + shown);
  console.log("ok: a message streams an answer");
  if (errors.length) fail("console errors: " + JSON.stringify(errors));
  console.log("ok: no console errors");
} finally {
  await browser.close();
}
console.log("all checks passed");
