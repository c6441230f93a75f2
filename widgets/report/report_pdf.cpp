// PDF through QTextDocument + QPdfWriter (see report_pdf.h). The document is laid out at 96 dpi
// (CSS pixels) so the HTML's sizes mean the same as in a browser; the writer scales to the page.
#include "widgets/report/report_pdf.h"

#include <QAbstractTextDocumentLayout>
#include <QBuffer>
#include <QImage>
#include <QPageLayout>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QTextDocument>
#include <QUrl>

#include "engine/core/error.h"
#include "widgets/report/report_html.h"
#include "widgets/report/report_text.h"

namespace lathe::report {

namespace {

constexpr int kDpi = 96;
constexpr double kHeaderPx = 26, kFooterPx = 24;

void draw_page_frame(QPainter& p, const QRectF& page, const QString& title, const QString& generated, int number,
                     int count) {
  const QColor muted(0x8a, 0x96, 0xa3);
  QFont font("DejaVu Sans");
  font.setPointSizeF(7);
  p.setFont(font);
  p.setPen(muted);
  const QRectF head(page.left(), page.top(), page.width(), kHeaderPx - 8);
  p.drawText(head, Qt::AlignLeft | Qt::AlignVCenter, "Lathe  \u00b7  " + title);
  p.drawText(head, Qt::AlignRight | Qt::AlignVCenter, generated);
  p.setPen(QPen(QColor(0x2b, 0x5d, 0x8a), 1));
  p.drawLine(QPointF(page.left(), page.top() + kHeaderPx - 6), QPointF(page.right(), page.top() + kHeaderPx - 6));
  p.setPen(QPen(QColor(0xc9, 0xd3, 0xdd), 0.8));
  const double foot_y = page.bottom() - kFooterPx + 6;
  p.drawLine(QPointF(page.left(), foot_y), QPointF(page.right(), foot_y));
  p.setPen(muted);
  const QRectF foot(page.left(), foot_y + 2, page.width(), kFooterPx - 8);
  p.drawText(foot, Qt::AlignRight | Qt::AlignVCenter, QString("page %1 of %2").arg(number).arg(count));
  p.drawText(foot, Qt::AlignLeft | Qt::AlignVCenter, "lathe-cli report");
}

}  // namespace

QByteArray render_report_pdf(const ReportData& data) {
  const std::vector<ChartImage> charts = render_report_charts(data, HtmlFlavor::print);
  const std::string html = build_report_html(data, charts, HtmlFlavor::print);

  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  {
    QPdfWriter writer(&buffer);
    writer.setResolution(kDpi);
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Portrait, QMarginsF(14, 12, 14, 12),
                                     QPageLayout::Millimeter));
    const QString title = QString::fromStdString(report_title(data));
    writer.setTitle(title);
    writer.setCreator("Lathe (lathe_report)");

    QTextDocument doc;
    doc.documentLayout()->setPaintDevice(&writer);
    doc.setDocumentMargin(0);
    for (size_t i = 0; i < charts.size(); ++i) {
      QImage image;
      LATHE_CHECK(image.loadFromData(charts[i].png, "PNG"), "chart ", charts[i].metric, " is not a PNG");
      doc.addResource(QTextDocument::ImageResource, QUrl(QString::fromStdString(chart_resource_name(i))), image);
    }
    doc.setHtml(QString::fromStdString(html));

    const QRectF page(QPointF(0, 0), writer.pageLayout().paintRectPixels(kDpi).size());
    const QSizeF body(page.width(), page.height() - kHeaderPx - kFooterPx);
    doc.setPageSize(body);  // (not setTextWidth: that would turn pagination off again)
    const int pages = doc.pageCount();
    const QString generated = QString::fromStdString("generated " + format_local_time(data.generated_ms));

    QPainter painter;
    LATHE_CHECK(painter.begin(&writer), "cannot start painting the PDF");
    for (int n = 0; n < pages; ++n) {
      if (n > 0)
        writer.newPage();
      draw_page_frame(painter, page, title, generated, n + 1, pages);
      painter.save();
      painter.translate(0, kHeaderPx - n * body.height());
      const QRectF clip(0, n * body.height(), body.width(), body.height());
      QAbstractTextDocumentLayout::PaintContext ctx;
      ctx.clip = clip;
      painter.setClipRect(clip);
      doc.documentLayout()->draw(&painter, ctx);
      painter.restore();
    }
    LATHE_CHECK(painter.end(), "cannot finish the PDF");
  }
  return bytes;
}

}  // namespace lathe::report
